#!/usr/bin/env bash
# What the instruction's text adds: the editor probe with the right instruction (written as the learned Advisor
# writes it), a constant one (the operation at center-center-center, what frames centred on every edit made the
# Advisor say), a wrong place and the opposite operation; raw (threshold + confinement), network (unconfined
# threshold: the network alone with the text) and decoded. Development data only (DIADEM OP_1-OP_6, SYNTHETIC
# synthetic_cwmbs_weak); the real breaks come from the cached unet3d dev masks present. Writes
# experiments/editor/instructions/editor_probe.md / .csv. A 64x128x128 decoded edit is timed on 2 threads.
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
HF_HUB_OFFLINE=1 $NR study probe-editor --out experiments/editor/instructions --n 20 --seed 0 \
  --kinds break,noise,real_break --threads 1 --speed-threads 2 "$@"
