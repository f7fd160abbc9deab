#!/usr/bin/env bash
# table_1_synthetic_cwmbs_weak: the commands that wrote table_1_synthetic_cwmbs_weak.md and .csv here (rows cached
# in outputs/tables/synthetic_cwmbs_weak/; the second run's table holds both segmenters' rows): initial, classical
# and NeuroRefiner on the 3D U-Net's and the nnU-Net-style network's masks. No learned baselines: this preset's
# refiner folder has none adapted (its card says so).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_weak segmenter=unet3d 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_weak segmenter=nnunet_style 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
