#!/usr/bin/env bash
# Ceilings of gold-vetted refinement on DIADEM dev (real data, OP_1-OP_6 only; the test stacks never enter),
# both segmenters' masks, with the held-out judge's rows and the learned agents' loop; then the shipped judge.
# Writes ceilings_diadem_dev.md / _test.md (and .csv) here, and checkpoints/judge.json with its card
# checkpoints/judge.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=.venv/bin/neurorefiner
$NR study ceilings --dataset diadem --split dev --segmenters unet3d,nnunet_style --out experiments/ceilings "$@"
# the same rows on the held-out test stacks, measured only (the shipped judge as is, nothing trained there)
$NR study ceilings --dataset diadem --split test --segmenters unet3d,nnunet_style --no-loop --out experiments/ceilings
$NR train-judge --dataset diadem --split dev --segmenters unet3d,nnunet_style --out checkpoints/judge.json
