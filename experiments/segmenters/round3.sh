#!/usr/bin/env bash
# Issue 5, third round: every baseline network on DIADEM with the shipped U-Net's recipe, shorter (unet3d here =
# the same U-Net at 256 steps, for an equal-steps comparison; the shipped one had 768).
#
#   STEP=train ARCHS="vnet gbpnet_style" bash experiments/segmenters/round3.sh   # train (one torch thread each)
#   STEP=eval  ARCHS="vnet"              bash experiments/segmenters/round3.sh   # test rows of one network
#   STEP=table                           bash experiments/segmenters/round3.sh   # merge into diadem_test_all.md
#
# Recipe = conf/experiment/segment_diadem_cpu.yaml (OP_1-OP_5 train, OP_6 validation picks the checkpoint,
# percentile normalisation, adaptive labels, 24x128x128 crops, batch 2) but 256 steps (8 epochs x 32), a third
# of the U-Net's 768: the 2-core budget of one session for seven networks. UNETR/SwinUNETR need crops that are
# multiples of 16/32: 32x128x128. Post-processing is NOT re-chosen per network: every one gets the U-Net's
# setting chosen on OP_6 (threshold 0.6, keep the largest component), recorded in its export.
# OP_7-OP_9 (test) are only scored, after training, once.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
STEP=${STEP:?STEP=train|eval|table}
ARCHS=${ARCHS:-"nnunet_style sgsnet_style adtlnet_style vnet gbpnet_style unetr swinunetr unet3d"}
OUT=experiments/segmenters/round3
export WANDB_MODE=offline
ckpt_of() { echo "checkpoints/runs/segment/$1/diadem_r3/segmenter.pt"; }

case $STEP in
train)
  for arch in $ARCHS; do
    patch="[24,128,128]"
    case $arch in unetr|swinunetr) patch="[32,128,128]";; esac
    $PY train.py task=segment experiment=segment_diadem_cpu model="$arch" \
      segmentation.data.patch_size="$patch" segmentation.ckpt_dir="checkpoints/runs/segment/$arch/diadem_r3" \
      trainer.max_epochs=8 trainer.check_val_every_n_epoch=2 trainer.enable_progress_bar=false
  done ;;
eval)
  for arch in $ARCHS; do
    ck=$(ckpt_of "$arch")
    $PY -c "from neurorefiner.inference.segmenter import PostProcess, record_postprocess; \
record_postprocess('$ck', PostProcess(0.6, 0, 1), 'not chosen for this network: the CPU 3D U-Net setting \
(DIADEM OP_6, experiments/segmenters/postprocess_dev_OP_6_tiebreak.md)')"
    name=$arch  # the shipped U-Net's rows and M_init are "unet3d": this run's are told apart
    [ "$arch" = unet3d ] && name="unet3d:256steps"
    $PY experiments/segmenters/rows.py --dataset diadem --split test --segmenter "$name=$ck" --raw --no-naive \
      --threads 1 --out "$OUT/$arch"
    $PY -c "from neurorefiner.training.segmenter import provenance_markdown as p; \
print(p('$ck', 'STEP=train ARCHS=$arch bash experiments/segmenters/round3.sh', '$arch on DIADEM dev, round 3 (256 steps)'))" \
      > "$OUT/$arch/card.md"
  done ;;
table)
  # the shipped U-Net and the naive floor first, then the previous shipped U-Nets (rounds 4, 2), then round 3
  inc=(--include experiments/segmenters/diadem_test_cases.csv)
  for prev in round5 round4 round2; do  # earlier shipped U-Nets (unet3d:r5, :r4, :r2), newest first
    [ -f "experiments/segmenters/$prev/diadem_test_cases.csv" ] && inc+=(--include "experiments/segmenters/$prev/diadem_test_cases.csv")
  done
  for arch in $ARCHS; do
    [ -f "$OUT/$arch/diadem_test_cases.csv" ] && inc+=(--include "$OUT/$arch/diadem_test_cases.csv")
  done
  $PY experiments/segmenters/rows.py --dataset diadem --split test --no-naive --plot "${inc[@]}" \
    --stem diadem_test_all --out experiments/segmenters ;;
*) echo "unknown STEP=$STEP" >&2; exit 2 ;;
esac
