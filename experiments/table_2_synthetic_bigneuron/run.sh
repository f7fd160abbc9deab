#!/usr/bin/env bash
# table_2_synthetic_bigneuron: the commands that wrote table_2_synthetic_bigneuron.md and .csv here (rows cached in outputs/tables/synthetic_bigneuron/; the second
# run's table holds both segmenters' rows). SegRefiner-style rows are left out (about 4 minutes a volume on 2
# cores); `bash run.sh` with no methods override runs every row of conf/experiment.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_2_synthetic_bigneuron segmenter=unet3d 'methods=[initial,classical,segfix,transfiner,neurorefiner]' 'protocols=[root_seeded]' "$@"
.venv/bin/python evaluate.py experiment=table_2_synthetic_bigneuron segmenter=nnunet_style 'methods=[initial,classical,neurorefiner]' 'protocols=[root_seeded]' "$@"
