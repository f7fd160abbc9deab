#!/usr/bin/env bash
# How the shipped CPU checkpoints (checkpoints/toporefinenet*.ckpt) were trained and carded, in order.
# TRAIN=1 reruns the training (about 45 min on a quiet 2-core CPU); without it only the cards are rewritten
# from the JSON files the runs left in outputs/.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
Q="trainer.enable_progress_bar=false trainer.enable_checkpointing=false trainer.log_every_n_steps=10"
C1="python train.py +stage=1 paths.checkpoint_dir=outputs/cpu_toporefinenet_ew stages.1.max_steps=700 +trainer.max_time=00:00:38:00 $Q"
C1B="python train.py +stage=1 paths.checkpoint_dir=outputs/cpu_toporefinenet_ew2 stages.1.max_steps=400 stages.1.lr=5e-4 model.swap_instruction_prob=0.5 stages.1.init_from=outputs/cpu_toporefinenet_ew/toporefinenet_stage1.ckpt stages.1.datamodule.seed=1 +trainer.max_time=00:00:16:00 $Q"
M1="neurorefiner init-masks --dataset diadem --segmenter unet3d --split dev --threads 1 --out data/cache/init_masks_dev/diadem/unet3d"
M2="neurorefiner init-masks --dataset diadem --segmenter nnunet_style --split dev --threads 1 --out data/cache/init_masks_dev/diadem/nnunet_style"
C2="python train.py +stage=2 paths.checkpoint_dir=outputs/cpu_toporefinenet_s2 stages.2.init_from=outputs/cpu_toporefinenet_ew2/toporefinenet_stage1.ckpt stages.2.datamodule.init_masks_root=data/cache/init_masks_dev model.swap_instruction_prob=0.5 stages.2.max_steps=250 +trainer.max_time=00:00:13:00 $Q"
if [[ "${TRAIN:-0}" == 1 ]]; then
  for c in "$C1" "$C1B" "$M1" "$M2" "$C2"; do $PY ${c#python }; done
fi
cp outputs/cpu_toporefinenet_ew2/toporefinenet_stage1.ckpt outputs/cpu_toporefinenet_ew2/toporefinenet_stage1.json \
   outputs/cpu_toporefinenet_s2/
$PY experiments/toporefinenet/make_checkpoint_card.py --src outputs/cpu_toporefinenet_s2 --name toporefinenet --stages 1 2 \
  --command1 "$C1
$C1B
# (figures below: the continuation; its validation defects use seed 1)" \
  --command2 "$M1
$M2
$C2" \
  --data "stage 1 = synthetic defects (conf/refine_stage/stage1.yaml: breaks by erosion k in [5, 20], pasted foreign annotation, Gaussian noise blobs) cut into the gold masks of DIADEM OP_1-OP_5, crops (z, y, x) 32 x 64 x 64, batch 2, validation = 32 fixed defects on OP_6. Stage 2 = 569 crops mined (Stage2MinedDataModule, difference_writer instructions) from the masks of the shipped CPU segmenters unet3d and nnunet_style on DIADEM OP_1-OP_5, validation on OP_6 crops. OP_7-OP_9 never used. On the mined stage-2 validation crops the segmenter masks reach only Dice 0.064 to gold (val/dice_input), so stage 2 learns from very poor masks." \
  --machine "2-core CPU shared with other jobs, 1 thread"
