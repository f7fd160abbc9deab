#!/usr/bin/env bash
# The segmenter tables of this folder, each from neurorefiner commands (README.md says which file each step writes).
#
#   bash experiments/segmenters/run.sh                      # STEP=tables: merge + summaries, seconds, no training
#   STEP=test bash experiments/segmenters/run.sh            # shipped U-Net + naive floor on DIADEM test (minutes)
#   STEP=networks ARCHS="vnet unetr" bash experiments/segmenters/run.sh   # train + score other networks (hours)
#   STEP=cv RUNS="1:256 2:256 3:256" [SEED=1 ROOT=.../cv_seed1] bash ...  # cross-validation folds (hours)
#   STEP=choose bash experiments/segmenters/run.sh          # choose on the folds' out-of-fold maps
#   STEP=dev bash experiments/segmenters/run.sh             # naive floor on dev; gold-extent diagnostic
# SYNTHETIC presets: run_synthetic.sh (train, choose, eval, floor per network and preset).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
STEP=${STEP:-tables}
ARCHS=${ARCHS:-"nnunet_style sgsnet_style adtlnet_style vnet gbpnet_style unetr swinunetr unet3d"}
CV=${CV:-checkpoints/runs/segment/unet3d}
OUT=experiments/segmenters
export WANDB_MODE=offline

case $STEP in
tables)
  inc=(--include $OUT/diadem_test_cases.csv)
  for arch in $ARCHS; do inc+=(--include "$OUT/diadem/${arch}_test_cases.csv"); done
  $NR study segmenter-rows --dataset diadem --split test --no-naive --plot "${inc[@]}" --stem diadem_test_all --out $OUT
  $NR study segmenter-summary --tables $OUT
  $NR study prior-compare --preset synthetic_cwmbs_weak --seed 0 --seed 1 --tables $OUT/synthetic --out $OUT ;;
test)
  $NR study segmenter-rows --dataset diadem --split test --segmenter unet3d=checkpoints/segmenters/unet3d_diadem_cpu.pt \
    --raw --threads 1 --out $OUT
  $NR study gold-scope --split test --out $OUT ;;
networks)  # the shipped U-Net's recipe at 256 steps; post-processing of the U-Net chosen on OP_6, not re-chosen
  for arch in $ARCHS; do
    ck=checkpoints/runs/segment/$arch/diadem/segmenter.pt patch="[24,128,128]"
    case $arch in unetr|swinunetr) patch="[32,128,128]" ;; esac
    $PY train.py task=segment experiment=segment_diadem_cpu model="$arch" segmentation.data.patch_size="$patch" \
      segmentation.ckpt_dir="$(dirname "$ck")" trainer.max_epochs=8 trainer.check_val_every_n_epoch=2 \
      trainer.enable_progress_bar=false
    $PY -c "from neurorefiner.inference.segmenter import PostProcess, record_postprocess as r; \
r('$ck', PostProcess(0.6, 0, 1), 'not chosen for this network: the CPU 3D U-Net setting chosen on DIADEM OP_6')"
    name=$arch; [ "$arch" = unet3d ] && name="unet3d:256steps"  # the shipped U-Net's rows are "unet3d"
    $NR study segmenter-rows --dataset diadem --split test --segmenter "$name=$ck" --raw --no-naive --threads 1 \
      --stem "${arch}_test" --out $OUT/diadem
    $PY -c "from neurorefiner.training.segmenter import provenance_markdown as p; print(p('$ck', \
'STEP=networks ARCHS=$arch bash experiments/segmenters/run.sh', '$arch on DIADEM dev (256 steps)'))" \
      > "$OUT/diadem/${arch}_card.md"
  done ;;
cv)  # folds hold out {OP_1,OP_2}, {OP_3,OP_4}, {OP_5,OP_6}; the last checkpoint is exported
  declare -A HELD=([1]="[OP_1,OP_2]" [2]="[OP_3,OP_4]" [3]="[OP_5,OP_6]")
  for run in ${RUNS:?RUNS=\"fold:steps ...\"}; do
    fold=${run%%:*} steps=${run##*:}
    dir=${ROOT:-$CV/cv}/f${fold}_${steps}
    [ -f "$dir/segmenter.pt" ] || $PY train.py task=segment experiment=segment_diadem_cpu seed="${SEED:-0}" \
      segmentation.ckpt_dir="$dir" segmentation.data.val_cases="${HELD[$fold]}" segmentation.export_checkpoint=last \
      trainer.max_epochs=$((steps / 32)) trainer.check_val_every_n_epoch=$((steps / 32)) \
      trainer.enable_progress_bar=false
    $NR study segmenter-cv probs --run "$dir"
  done ;;
choose)  # the shipped U-Net's choice: one network (three seeds per fold), thresholds x gap bridging, keep largest
  $NR study segmenter-cv choose $CV/cv/f*_256 $CV/cv_seed1/f*_256 $CV/cv_seed2/f*_256 --out $OUT/cv_dev \
    --threshold 0.6 --threshold 0.7 --threshold 0.8 --threshold 0.9 --bridge 0 --bridge 3 --bridge 6 --dust 0 --keep 1 ;;
dev)
  $NR study segmenter-rows --dataset diadem --split dev --out $OUT/cv_dev --stem naive_floor_dev
  $NR study gold-scope --split dev --threshold 0.8 --bridge 3 --out $OUT ;;
*) echo "unknown STEP=$STEP (tables, test, networks, cv, choose, dev)" >&2; exit 2 ;;
esac
