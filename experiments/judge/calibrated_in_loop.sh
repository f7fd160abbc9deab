#!/usr/bin/env bash
# One judge for every dataset in the loop, as shipped and with its thresholds set on two traced val stacks of the
# SYNTHETIC stand-in (`neurorefiner calibrate-judge`), against the preset's own judge (the table's NeuroRefiner
# row). Test split, root-seeded APP2, the shipped U-Net's masks; rows are shared with
# `python evaluate.py experiment=<TABLE>` (same out_dir), so the initial and NeuroRefiner rows are reused.
# Writes experiments/judge/calibrated_in_loop_<DATASET>.md (the evaluation's table of every row, with the command,
# date and commit) and the calibrated judge's card beside it.
#   DATASET=synthetic_zbfwb TABLE=table_2_synthetic_zbfwb bash experiments/judge/calibrated_in_loop.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
DATASET=${DATASET:-synthetic_zbfwb}
TABLE=${TABLE:-table_2_synthetic_zbfwb}
LABELLED=${LABELLED:-"val_000 val_001"}
NR=${NR:-.venv/bin/neurorefiner}   # the console command (a wrapper running this checkout's code in a worktree)
WORK=outputs/judge/calibrated_in_loop/$DATASET
mkdir -p "$WORK"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!experiments/judge' || echo +dirty)
"$NR" init-masks --dataset "$DATASET" --split val --segmenter unet3d
stacks=()
for v in $LABELLED; do
  base=data/cache/synth/$DATASET/val/${DATASET}_$v
  stacks+=(--stack "${base}_image.tif,data/cache/init_masks/$DATASET/unet3d/${DATASET}_$v.tif,${base}_gold.swc")
done
"$NR" calibrate-judge "${stacks[@]}" --judge checkpoints/judge_transfer.pt --kinds join,remove \
  --out "$WORK/judge_transfer_calibrated.pt"
.venv/bin/python evaluate.py experiment="$TABLE" 'methods=[initial,neurorefiner,nr_transfer,nr_calibrated]' \
  'protocols=[root_seeded]' \
  '+method@method_registry.nr_transfer=neurorefiner' \
  "+method_registry.nr_transfer.agent_overrides={inspector:{judge:$PWD/checkpoints/judge_transfer.pt}}" \
  '+method@method_registry.nr_calibrated=neurorefiner' \
  "+method_registry.nr_calibrated.agent_overrides={inspector:{judge:$PWD/$WORK/judge_transfer_calibrated.pt}}" \
  table.out="$WORK/table" figures=false save_masks=false progress=false
out=experiments/judge/calibrated_in_loop_$DATASET.md
{
  echo "# One judge for every dataset, calibrated on two traced stacks: $DATASET (SYNTHETIC)"
  echo
  echo "Made $(date -u '+%Y-%m-%d %H:%M UTC') at commit \`$commit\` by \`DATASET=$DATASET TABLE=$TABLE bash experiments/judge/calibrated_in_loop.sh\`."
  echo "Rows: \`initial\` the shipped U-Net's test masks; \`neurorefiner\` the learned agents with the preset's own judge"
  echo "(the table's row); \`nr_transfer\` the same agents with \`checkpoints/judge_transfer.pt\` as shipped;"
  echo "\`nr_calibrated\` with that judge's join and removal thresholds set on $LABELLED by \`neurorefiner calibrate-judge\`"
  echo "(card below). Root-seeded APP2; F1 etc. in %."
  echo
  sed -n '/^| method_protocol/,/^$/p' "outputs/tables/$DATASET/table.md"
  echo
  echo "## The calibrated judge's card"
  echo
  sed 's/^# /### /' "$WORK/judge_transfer_calibrated.md"
} > "$out.tmp" && mv "$out.tmp" "$out"
echo "-> $out"
