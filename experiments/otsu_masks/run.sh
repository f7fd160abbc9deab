#!/usr/bin/env bash
# Otsu threshold masks refined, DIADEM dev OP_1-OP_6 (real data; the test stacks OP_7-OP_9 never enter): per stack,
# the naive mask against NeuroRefiner with the check of a join's far piece off and on (shipped judge, and judges
# held out on each stack); and every join to a large piece that a held-out judge makes on the otsu, unet3d and
# nnunet_style masks, with what it does. Writes otsu_masks.md, per_stack.csv and joins_to_large_pieces.csv here.
# Masks are made on first use (Otsu: seconds; the learned segmenters' dev masks: minutes each on a CPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/neurorefiner study otsu-masks --dataset diadem --split dev --out experiments/otsu_masks "$@"
