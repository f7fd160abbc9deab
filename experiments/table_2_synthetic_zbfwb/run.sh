#!/usr/bin/env bash
# table_2_synthetic_zbfwb: the command that wrote table_2_synthetic_zbfwb.md and .csv here (rows cached in
# outputs/tables/synthetic_zbfwb/): the 3D U-Net rows of initial, classical and NeuroRefiner (CPU time); the
# nnU-Net-style rows and the learned baselines: python evaluate.py -m experiment=table_2_synthetic_zbfwb segmenter=unet3d,nnunet_style
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_2_synthetic_zbfwb segmenter=unet3d 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
