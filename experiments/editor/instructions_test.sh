#!/usr/bin/env bash
# DIADEM test OP_7-OP_9 (real data; held out: nothing is chosen from this), root-seeded APP2, both shipped
# segmenters' masks, default learned agents: the Advisor's frames placed as the editor's training crops hold
# their defects (neurorefiner, the default) against frames centred on each edit (nr_centred: the constant
# sentence "Repair break at center-center-center"). Then the sentences in every trace are counted
# (neurorefiner study instruction-census). Rows and traces land in OUT (default outputs/tables/diadem, shared
# with `evaluate.py experiment=table_diadem`, so rows already there are reused); instructions_test.md beside this
# file is written from OUT's rows and traces with its date and the rows' commit
# (neurorefiner study instructions-table).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-outputs/tables/diadem}
for seg in unet3d nnunet_style; do
  .venv/bin/python evaluate.py dataset=diadem split=test segmenter=$seg \
    'methods=[initial,neurorefiner,nr_centred]' 'protocols=[root_seeded]' \
    '+method@method_registry.nr_centred=neurorefiner' \
    '+method_registry.nr_centred.agent_overrides={advisor:{placement:centred}}' \
    out_dir="$OUT" figures=false save_masks=false progress=false "$@"
done
.venv/bin/neurorefiner study instructions-table "$OUT" --split test \
  --target experiments/editor/instructions_test.md
