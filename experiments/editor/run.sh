#!/usr/bin/env bash
# The editor probe (about 10 minutes on 2 cores): breaks, noise blobs, pasted fragments and noise on a
# crossing neurite cut into development blocks (DIADEM OP_1-OP_6, synthetic cwmbs_weak), each edited with
# the correct instruction, a wrong place and the opposite operation; raw network and topology decoding
# side by side, plus the time of one 64 x 128 x 128 edit. Writes editor_probe.md / .csv here.
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
HF_HUB_OFFLINE=1 $NR probe-editor --out experiments/editor --n 50 --seed 0 --threads 1 --speed-threads 2 "$@"
