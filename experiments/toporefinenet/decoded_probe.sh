#!/usr/bin/env bash
# The issue's decoded targets for the budget run's weights against the shipped editor, same run of the code:
# the editor probe (neurorefiner study probe-editor: DIADEM OP_1-OP_6 and SYNTHETIC cwmbs_weak stacks, 20 defects a
# kind, seed 0; real breaks from the cached unet3d dev masks) with the correct instruction, a wrong place and the
# opposite operation, raw and decoded (the network's pass on the crop around the named place, then the topology
# decoding, as the editor runs it). BUDGET=<a checkpoint of the budget run> (default: phase 3 at 4,881 steps, the
# committed table's; that table was made from the same weights before they were copied, without the optimiser, to
# checkpoints/resume/toporefinenet_stage1_budget_film/weights_4881.ckpt, so its header names the copy's source).
# Writes results/decoded_probe/{shipped,budget}/editor_probe.md / .csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1
NR=${NR:-.venv/bin/neurorefiner}
BUDGET=${BUDGET:-checkpoints/resume/toporefinenet_stage1_budget_film/weights_4881.ckpt}
RESULTS=experiments/toporefinenet/results/decoded_probe
# ARMS="name=checkpoint ..." replaces the two arms (e.g. the later phases: see README.md, "Decoded"); two at a time.
ARMS=${ARMS:-"shipped=checkpoints/toporefinenet.ckpt budget=$BUDGET"}
i=0
for arm in $ARMS; do
  $NR study probe-editor --out "$RESULTS/${arm%%=*}" --n 20 --seed 0 --kinds break,noise,real_break --threads 1 \
    --speed-threads 0 --checkpoint "${arm#*=}" &
  i=$((i + 1)); if [ $((i % 2)) -eq 0 ]; then wait; fi
done
wait
