#!/usr/bin/env bash
# table_1_synthetic_cwmbs_noise: the commands that wrote table_1_synthetic_cwmbs_noise.md and .csv here (rows cached in outputs/tables/synthetic_cwmbs_noise/; the second
# run's table holds both segmenters' rows). SegRefiner-style rows are left out (about 4 minutes a volume on 2
# cores); `bash run.sh` with no methods override runs every row of conf/experiment.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_noise segmenter=unet3d 'methods=[initial,classical,segfix,transfiner,neurorefiner]' 'protocols=[root_seeded]' "$@"
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_noise segmenter=nnunet_style 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
