#!/usr/bin/env bash
# loop.retry_declined on the SYNTHETIC stand-ins' val splits (test never read): after the editor declines an edit on
# the evidence (a bridge over the decoding's limits, isolated pieces the image shows), try other frames (true, as
# shipped) or escalate the defect at once (false). Each run's rows are tabulated per stack into
# experiments/declined_retry/<preset>_val_<setting>.md. PRESETS (default "bigneuron zbfwb cwmbs_noise") picks them;
# PRESETS=bigneuron_fresh runs the two settings on 8 fresh renders of bigneuron's test morphology instead (below).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
out=outputs/dev/declined_retry
common=("methods=[initial,neurorefiner]" "protocols=[root_seeded]" split=val table=null figures=false save_masks=false
        progress=false)
declare -A experiment=([bigneuron]=table_2_synthetic_bigneuron [zbfwb]=table_2_synthetic_zbfwb
                       [cwmbs_noise]=table_1_synthetic_cwmbs_noise)
for preset in ${PRESETS:-bigneuron zbfwb cwmbs_noise}; do
  [[ $preset == *_fresh ]] && continue
  for setting in true false; do
    name=${preset}_val_retry_declined_${setting}
    python evaluate.py experiment="${experiment[$preset]}" "${common[@]}" \
      method_registry.neurorefiner.loop.retry_declined=$setting out_dir=$out/$name
    neurorefiner make rows-table "$out/$name" --split val --method initial --method neurorefiner \
      --title "loop.retry_declined=$setting on SYNTHETIC $preset val" --command "experiments/declined_retry/run.sh" \
      --target "experiments/declined_retry/$name.md"
  done
done
# bigneuron val (4 stacks) holds no join the editor declined and a retry made (the two settings are equal there), so
# the same two settings on 8 fresh renders of the test split's morphology (dataset seed 2032, never used elsewhere;
# own data folder; the test volumes themselves are not read)
fresh=("dataset.seed=2032" "dataset.root=data/cache/synth/synthetic_bigneuron_fresh2032" dataset.n_train=0
       dataset.n_val=0 dataset.n_test=8 split=test "methods=[initial,neurorefiner]" "protocols=[root_seeded]"
       table=null figures=false save_masks=false progress=false)
if [[ " ${PRESETS:-} " == *" bigneuron_fresh "* ]]; then
  for setting in true false; do
    name=bigneuron_fresh_retry_declined_${setting}
    python evaluate.py experiment=table_2_synthetic_bigneuron "${fresh[@]}" \
      method_registry.neurorefiner.loop.retry_declined=$setting out_dir=$out/$name
    neurorefiner make rows-table "$out/$name" --split test --method initial --method neurorefiner \
      --title "loop.retry_declined=$setting on SYNTHETIC bigneuron, fresh renders (seed 2032)" \
      --command "PRESETS=bigneuron_fresh experiments/declined_retry/run.sh" \
      --target "experiments/declined_retry/$name.md"
  done
fi
