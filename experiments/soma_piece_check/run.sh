#!/usr/bin/env bash
# The join's piece check against a tree that is the soma's piece, on SYNTHETIC zbfwb val (6 stacks; test never
# read): the check as shipped (the far piece's median signal >= 0.6 of the tree's), off, and skipped while the
# tree is smaller than the far piece (agent.inspector.join_piece_skip_small_tree). Each run's rows are tabulated
# per stack into experiments/soma_piece_check/<run>.md. PARTS="val fresh" (default both) picks the parts.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
out=outputs/dev/soma_piece_check
common=("methods=[initial,neurorefiner]" "protocols=[root_seeded]" table=null figures=false save_masks=false progress=false)
parts=${PARTS:-"val fresh"}
want() { [[ " $parts " == *" $1 "* ]]; }
want val && for run in checked:agent.inspector.join_piece_min_signal=0.6 off:agent.inspector.join_piece_min_signal=0.0 \
           skip_small_tree:agent.inspector.join_piece_skip_small_tree=true; do
  name=zbfwb_val_${run%%:*}
  python evaluate.py experiment=table_2_synthetic_zbfwb split=val "${common[@]}" "${run#*:}" out_dir=$out/$name
  neurorefiner make rows-table "$out/$name" --split val --method initial --method neurorefiner \
    --title "soma piece check: $name (${run#*:})" --command "experiments/soma_piece_check/run.sh" \
    --target "experiments/soma_piece_check/$name.md"
done
# Val holds no stack whose soma's piece is smaller than the neurite beside it (the three runs above are equal), so
# the same two settings on 4 fresh renders of the test split's morphology (dataset seed 2031, never used elsewhere;
# own cache folder; the test volumes themselves are not read)
fresh=("dataset.seed=2031" "dataset.root=data/cache/synth/synthetic_zbfwb_fresh2031" dataset.n_train=0 dataset.n_val=0
       dataset.n_test=4 split=test)
want fresh && for run in checked:agent.inspector.join_piece_min_signal=0.6 skip_small_tree:agent.inspector.join_piece_skip_small_tree=true; do
  name=zbfwb_fresh_${run%%:*}
  python evaluate.py experiment=table_2_synthetic_zbfwb "${fresh[@]}" "${common[@]}" "${run#*:}" out_dir=$out/$name
  neurorefiner make rows-table "$out/$name" --split test --method initial --method neurorefiner \
    --title "soma piece check: $name (${run#*:}; fresh renders, seed 2031)" --command "experiments/soma_piece_check/run.sh" \
    --target "experiments/soma_piece_check/$name.md"
done
exit 0
