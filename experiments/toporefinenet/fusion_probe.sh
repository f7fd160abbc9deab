#!/usr/bin/env bash
# Table 6's fusion rows scored by the training probe at one stated budget: the budget run's U-Net body at 9,993
# steps (checkpoints/resume/toporefinenet_stage1_budget/weights_9993.ckpt) with a FRESH fusion block of each kind
# (stages.1.init_exclude=[fusion.]: CAB gets no head start from its trained block), 1,500 steps each on the stage-1
# shards with the budget run's loss (residual, edit weight 10, constant lr 5e-4, fresh AdamW), one core, one after
# the other; then the probe (held-out OP_6 + SYNTHETIC defects, stand-ins' real breaks, raw network, change
# thresholds 0.5 / 0.9). Writes results/fusion_probe/<fusion>.json and summary.md.
set -euo pipefail
source "$(dirname "$0")/forks.sh"
OUT=${OUT:-outputs/toporefinenet_fusion_forks}
RESULTS=experiments/toporefinenet/results/fusion_probe
mkdir -p "$OUT"
SCORE=()
for fusion in cab adaln cdp; do
  fork "$fusion" "stages.1.init_exclude=[fusion.]" model.net.fusion=$fusion
  SCORE+=("$fusion=$OUT/$fusion/toporefinenet_stage1.ckpt")
done
# the text-encoder row: CAB as above, the instruction embedded by a bag-of-words hashing encoder (384-d, as
# conf/experiment/table_6/hashing.yaml) instead of MiniLM
fork cab_hashing "stages.1.init_exclude=[fusion.]" model.net.fusion=cab text_encoder=hashing text_encoder.dim=384
SCORE+=("cab_hashing=$OUT/cab_hashing/toporefinenet_stage1.ckpt")
$NR study training-probe --out "$RESULTS" --n 20 --thresholds 0.5,0.9 \
  --standin-segmenters unet3d,nnunet_style "${SCORE[@]}"
$NR study probe-table "$RESULTS" cab="CAB (cross-attention; the paper's)" \
  adaln="AdaLN" cdp="CDP" cab_hashing="CAB + bag-of-words hashing encoder"
