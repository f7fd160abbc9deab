#!/usr/bin/env bash
# Does the editor do better when its stage-2 set is re-mined from the SYNTHETIC stand-ins' U-Net masks
# (synthetic_cwmbs_noise and synthetic_zbfwb train splits) as well as DIADEM dev's? Trains experiment=toporefinenet_standins_mined (the shipped editor's stage 2, mined set widened;
# not shipped) and probes it beside the shipped editor on the same cut defects: breaks, noise blobs and pasted
# fragments in DIADEM OP_1-OP_6 gold blocks and in synthetic_cwmbs_weak stacks rendered for the probe (a preset
# the mined set leaves out; never a test volume). Writes experiments/editor/standins_mined.md (+ the two probes under standins_mined/).
#   bash experiments/editor/standins_mined.sh            # masks (cached), training (~15 min), two probes
#   STEPS=probe bash experiments/editor/standins_mined.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
NR=${NR:-.venv/bin/neurorefiner}
PY=${PY:-.venv/bin/python}
HERE=experiments/editor
STEPS=${STEPS:-"masks train probe"}
CKPT=outputs/train/checkpoints/toporefinenet_standins_mined.ckpt
for step in $STEPS; do
  case $step in
    masks)
      $NR init-masks --dataset diadem --split dev --segmenter unet3d --threads 1
      for p in synthetic_cwmbs_noise synthetic_zbfwb; do
        $NR init-masks --dataset "$p" --split train --segmenter unet3d --threads 1
      done ;;
    train)
      $PY train.py experiment=toporefinenet_standins_mined ;;
    probe)
      for v in shipped standins_mined; do
        ckpt=$CKPT; [ "$v" = shipped ] && ckpt=checkpoints/toporefinenet.ckpt
        $NR study probe-editor --out "$HERE/standins_mined/$v" --n 20 --seed 0 --kinds break,noise,paste \
          --synthetic synthetic_cwmbs_weak --speed-threads 0 --checkpoint "$ckpt"
      done
      $NR study probe-compare --out "$HERE/standins_mined.md" \
        --title "Stage 2 re-mined from the SYNTHETIC stand-ins' masks: the editor probe" \
        --intro "Made by \`bash experiments/editor/standins_mined.sh\` (per checkpoint \`neurorefiner study probe-editor --n 20 --seed 0 --kinds break,noise,paste --synthetic synthetic_cwmbs_weak\`): 20 defects of each kind cut into gold blocks of DIADEM OP_1-OP_6 and of SYNTHETIC synthetic_cwmbs_weak stacks rendered for the probe, the same for both checkpoints, each edited with the right instruction, a wrong place and the opposite operation. The re-mined editor is \`python train.py experiment=toporefinenet_standins_mined\` (the shipped recipe with the U-Net train-split masks of synthetic_cwmbs_noise and synthetic_zbfwb added to the mined set; synthetic_cwmbs_weak is not in it). Shares of edits; raw = the network alone, decoded = with the topology decoding the agents use." \
        "shipped editor (DIADEM dev mined)=$HERE/standins_mined/shipped" \
        "re-mined (DIADEM dev + stand-ins)=$HERE/standins_mined/standins_mined" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
