#!/usr/bin/env bash
# table_diadem: the commands that write table_diadem.md and table_diadem.csv here (rows cached in outputs/tables/;
# the second run's table holds both segmenters' rows): the 3D U-Net rows with the learned refinement baselines,
# then the nnU-Net-style rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_diadem segmenter=unet3d \
  'methods=[initial,classical,segfix,segrefiner,transfiner,neurorefiner]' progress=false "$@"
.venv/bin/python evaluate.py experiment=table_diadem segmenter=nnunet_style progress=false "$@"
