#!/usr/bin/env bash
# table_1_synthetic_cwmbs_weak: the command that wrote table_1_synthetic_cwmbs_weak.md and .csv here (rows cached
# in outputs/tables/synthetic_cwmbs_weak/): the 3D U-Net rows of initial, classical and NeuroRefiner (CPU time); the
# nnU-Net-style rows and the learned baselines: python evaluate.py -m experiment=table_1_synthetic_cwmbs_weak segmenter=unet3d,nnunet_style
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_weak segmenter=unet3d 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
