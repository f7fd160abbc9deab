#!/usr/bin/env bash
# The editor probe (about 25 minutes on 2 shared cores): breaks, noise blobs, pasted fragments and noise on
# a crossing neurite cut into development blocks (DIADEM OP_1-OP_6, synthetic cwmbs_weak), plus the unet3d
# segmenter's own breaks and noise on DIADEM dev (its cached masks against gold; make them with
# `neurorefiner init-masks --dataset diadem --split dev --segmenter unet3d`), each edited with the correct
# instruction, a wrong place and the opposite operation; raw network (whole block) and topology decoding
# (network on the crop around the named place) side by side, plus the timing of one 64 x 128 x 128 edit
# (whole-block pass, crop pass, decoded edit). Writes editor_probe.md / .csv here.
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
HF_HUB_OFFLINE=1 $NR study probe-editor --out experiments/editor --n 50 --seed 0 --threads 1 --speed-threads 2 "$@"
