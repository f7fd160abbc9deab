#!/usr/bin/env bash
# table_6_toporefinenet: trains the six TopoRefineNet variants of conf/experiment/table_6/ (one at a time, one
# torch thread each; checkpoints under checkpoints/runs/table_6/<variant>/, not in git), then the one evaluate
# line writes table_6_toporefinenet.md and .csv here (rows cached in outputs/tables/). The masks stage 2 mines
# are made once first. Extra arguments go to the evaluate line.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
[ -d data/cache/init_masks_dev/diadem/unet3d ] && [ -n "$(ls data/cache/init_masks_dev/diadem/unet3d)" ] ||
  .venv/bin/neurorefiner init-masks --dataset diadem --split dev --segmenter unet3d --out data/cache/init_masks_dev/diadem/unet3d
.venv/bin/python train.py experiment=table_6/cab stage=1
.venv/bin/python train.py experiment=table_6/cab stage=2
.venv/bin/python train.py experiment=table_6/adaln stage=1
.venv/bin/python train.py experiment=table_6/adaln stage=2
.venv/bin/python train.py experiment=table_6/cdp stage=1
.venv/bin/python train.py experiment=table_6/cdp stage=2
.venv/bin/python train.py experiment=table_6/hashing stage=1
.venv/bin/python train.py experiment=table_6/hashing stage=2
.venv/bin/python train.py experiment=table_6/scratch_two_stage stage=1
.venv/bin/python train.py experiment=table_6/scratch_two_stage stage=2
.venv/bin/python train.py experiment=table_6/scratch_one_stage stage=2
.venv/bin/python evaluate.py experiment=table_6_toporefinenet "$@"
