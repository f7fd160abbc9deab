#!/usr/bin/env bash
# The segmenter tables of this folder, each from neurorefiner commands (README.md says which file each step writes).
#
#   bash experiments/segmenters/run.sh                      # STEP=tables: merge + summaries, seconds, no training
#   STEP=test bash experiments/segmenters/run.sh            # shipped U-Net + naive floor on DIADEM test (minutes)
#   STEP=networks ARCHS="vnet unetr" bash experiments/segmenters/run.sh   # train + score other networks (hours)
#   STEP=dev bash experiments/segmenters/run.sh             # naive floor on dev
# The cross-validation that chose the shipped U-Net's setting (cv_dev/), the gold-extent diagnostic (gold_scope_*)
# and the foreground-prior comparison (prior_compare_*) are retired studies: README.md names the commit and command.
# SYNTHETIC presets: run_synthetic.sh (train, choose, eval, floor per network and preset).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
STEP=${STEP:-tables}
ARCHS=${ARCHS:-"nnunet_style sgsnet_style adtlnet_style vnet gbpnet_style unetr swinunetr unet3d"}
OUT=experiments/segmenters
export WANDB_MODE=offline

case $STEP in
tables)
  inc=(--include $OUT/diadem_test_cases.csv)
  for arch in $ARCHS; do inc+=(--include "$OUT/diadem/${arch}_test_cases.csv"); done
  $NR make segmenter-rows --dataset diadem --split test --no-naive --plot "${inc[@]}" --stem diadem_test_all --out $OUT
  $NR make segmenter-summary --tables $OUT ;;
test)
  $NR make segmenter-rows --dataset diadem --split test --segmenter unet3d=checkpoints/segmenters/unet3d_diadem_cpu.pt \
    --raw --threads 1 --out $OUT ;;
networks)  # the shipped U-Net's recipe at 256 steps (OP_1-OP_5 train, OP_6 validates); each network's own
  # post-processing chosen on OP_6, its validation stack, and recorded in its checkpoint before the test rows
  for arch in $ARCHS; do
    ck=checkpoints/runs/segment/$arch/diadem/segmenter.pt patch="[24,128,128]"
    case $arch in unetr|swinunetr) patch="[32,128,128]" ;; esac
    $PY train.py task=segment experiment=segment_diadem_cpu model="$arch" segmentation.data.patch_size="$patch" \
      segmentation.ckpt_dir="$(dirname "$ck")" trainer.max_epochs=8 trainer.check_val_every_n_epoch=2 \
      trainer.enable_progress_bar=false
    $NR make postprocess --dataset diadem --split dev --case OP_6 --arch "$arch" --model "$ck" --out $OUT/diadem \
      --record
    name=$arch; [ "$arch" = unet3d ] && name="unet3d:256steps"  # the shipped U-Net's rows are "unet3d"
    $NR make segmenter-rows --dataset diadem --split test --segmenter "$name=$ck" --raw --no-naive --threads 1 \
      --stem "${arch}_test" --out $OUT/diadem
    $NR make segmenter-card "$ck" --command "STEP=networks ARCHS=$arch bash experiments/segmenters/run.sh" \
      --title "$arch on DIADEM dev (256 steps)" --out "$OUT/diadem/${arch}_card.md"
  done ;;
dev)
  $NR make segmenter-rows --dataset diadem --split dev --out $OUT/cv_dev --stem naive_floor_dev ;;
*) echo "unknown STEP=$STEP (tables, test, networks, dev)" >&2; exit 2 ;;
esac
