#!/usr/bin/env bash
# Why the editor leaves the SYNTHETIC stand-ins alone: a sample of the learned loop's editor calls on each preset's
# val split (never test), each step read against gold (neurorefiner.studies.editor_calls). Writes
# editor_calls_<preset>.md (summary) and .csv (one row a call) here. The judges are retrained first by the line
# in their cards (checkpoints/judge_synthetic_<preset>.md).
#   PRESETS="synthetic_zbfwb" bash experiments/editor_calls/run.sh
#   EXTRA="--no-group-noise" OUT=/tmp/x bash experiments/editor_calls/run.sh   # one defect per speck, as before
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
PRESETS=${PRESETS:-"synthetic_bigneuron synthetic_zbfwb"}
OUT=${OUT:-experiments/editor_calls}
for p in $PRESETS; do
  $NR study editor-calls --dataset "$p" --split val --judge "checkpoints/judge_${p}.json" --out "$OUT" \
    --sample 20 ${EXTRA:-}
done
