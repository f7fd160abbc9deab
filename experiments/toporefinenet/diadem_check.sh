#!/usr/bin/env bash
# The ship check of a candidate editor (the issue's "DIADEM test with it >= today's"): DIADEM test OP_7-OP_9 (real
# data, held out: a check run once per candidate, nothing is tuned on it), root-seeded APP2, default learned
# agents, both shipped segmenters' masks; the candidate (method NAME, the shipped `neurorefiner` with only
# editor.checkpoint=CANDIDATE) beside the shipped editor and the initial masks. Rows land in OUT (default
# outputs/tables/diadem, shared with the DIADEM tables, so rows already there are reused); the table is written
# from them to results/diadem_check_<NAME>.md.
#   CANDIDATE=<checkpoint> NAME=<method name> LABEL="<what it is>" bash experiments/toporefinenet/diadem_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1} WANDB_MODE=offline HF_HUB_OFFLINE=1
CANDIDATE=${CANDIDATE:?CANDIDATE=<checkpoint> is needed}
NAME=${NAME:-nr_candidate}
LABEL=${LABEL:-$NAME: the learned loop with $CANDIDATE as the editor}
OUT=${OUT:-outputs/tables/diadem}
for seg in unet3d nnunet_style; do
  .venv/bin/python evaluate.py dataset=diadem split=test segmenter=$seg "methods=[initial,neurorefiner,$NAME]" \
    'protocols=[root_seeded]' "+method@method_registry.$NAME=neurorefiner" \
    "+method_registry.$NAME.editor_overrides={checkpoint:'$CANDIDATE'}" \
    out_dir="$OUT" figures=false save_masks=false progress=false
done
.venv/bin/neurorefiner make rows-table "$OUT" --split test \
  --method "initial=initial masks" --method "neurorefiner=shipped editor (the default)" --method "$NAME=$LABEL" \
  --title "Ship check on DIADEM test (real data, held out): $NAME" \
  --command "CANDIDATE=$CANDIDATE NAME=$NAME bash experiments/toporefinenet/diadem_check.sh" \
  --target "experiments/toporefinenet/results/diadem_check_$NAME.md"
