#!/usr/bin/env bash
# The instruction-following tables of the shipped TopoRefineNet checkpoints (README.md), from a clone.
# Synthetic tables read only bundled data (DIADEM OP_6); the mined tables need the shipped segmenters' masks of
# DIADEM dev, made once below. OP_7-OP_9 are never used. The break probes are a retired study (README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1 WANDB_MODE=${WANDB_MODE:-offline}
R=experiments/toporefinenet/results
S1=(--ckpt checkpoints/toporefinenet_stage1.ckpt --label "stage 1 + 10 min break-heavy")
S2=(--ckpt checkpoints/toporefinenet.ckpt --label "break-heavy stage 1 + stage 2 with replay")
SYNTHETIC=(--n 64 --confine 4 stages.1.datamodule.distractor_prob=0.0)
MINED=(--n 64 --confine 4 --stage 2 stages.2.datamodule.init_masks_root=data/cache/init_masks_dev
       stages.2.datamodule.target=instructed)

$NR study instructions "${S2[@]}" "${SYNTHETIC[@]}" --out $R/two_stage_synthetic
$NR study instructions "${S1[@]}" "${SYNTHETIC[@]}" --out $R/stage1_synthetic

for seg in unet3d nnunet_style; do
  $NR init-masks --dataset diadem --split dev --segmenter $seg --threads 1 --out data/cache/init_masks_dev/diadem/$seg
done
$NR study instructions "${S2[@]}" "${MINED[@]}" --out $R/two_stage_mined
$NR study instructions "${S1[@]}" "${MINED[@]}" --out $R/stage1_mined
