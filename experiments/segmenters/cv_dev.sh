#!/usr/bin/env bash
# Cross-validation of the CPU 3D U-Net's step budget and post-processing over DIADEM dev (cv_dev.py's header).
#
#   RUNS="1:768 2:768" bash experiments/segmenters/cv_dev.sh     # train folds (one torch thread), then their
#   RUNS="3:768 1:256 2:256 3:256" bash experiments/segmenters/cv_dev.sh   #  out-of-fold probability maps
#   .venv/bin/python experiments/segmenters/cv_dev.py choose --runs checkpoints/runs/segment/unet3d/cv/f*_*
#
# SEED (default 0) and ROOT (default checkpoints/runs/segment/unet3d/cv) give a second seed its own folder:
#   SEED=1 ROOT=checkpoints/runs/segment/unet3d/cv_seed1 RUNS="3:768" bash experiments/segmenters/cv_dev.sh
# RUNS: fold:steps pairs; folds hold out {OP_1,OP_2}, {OP_3,OP_4}, {OP_5,OP_6}. Recipe: the shipped U-Net's
# (segment_diadem_cpu: percentile normalisation, adaptive labels, 24x128x128 crops, 32 steps per epoch),
# validation once at the end (reported, not used), the last checkpoint exported. OP_7-OP_9 are never read.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:?RUNS="fold:steps ..."}
SEED=${SEED:-0}
ROOT=${ROOT:-checkpoints/runs/segment/unet3d/cv}
export WANDB_MODE=offline
declare -A HELD=([1]="[OP_1,OP_2]" [2]="[OP_3,OP_4]" [3]="[OP_5,OP_6]")
for run in $RUNS; do
  fold=${run%%:*}; steps=${run##*:}
  epochs=$((steps / 32))
  dir="$ROOT/f${fold}_${steps}"
  if [ ! -f "$dir/segmenter.pt" ]; then
    $PY train.py task=segment experiment=segment_diadem_cpu seed="$SEED" segmentation.ckpt_dir="$dir" \
      segmentation.data.val_cases="${HELD[$fold]}" segmentation.export_checkpoint=last \
      trainer.max_epochs=$epochs trainer.check_val_every_n_epoch=$epochs trainer.enable_progress_bar=false
  fi
  $PY experiments/segmenters/cv_dev.py probs --run "$dir"
done
