#!/usr/bin/env bash
# The paper's segmenters on the SYNTHETIC stand-in presets (generated data, never BigNeuron/CWMBS/ZBFWB results) at
# one stated, equal CPU budget: every network gets the stand-in U-Net's recipe (experiment=unet3d_<preset>_cpu:
# the preset's train split, 16 x 80 x 80 crops centred near the label in two of three, labels widened to the imaged
# fibre, percentile normalisation, batch 2, one torch thread, the checkpoint picked by root-seeded APP2 F1 on val)
# with only the network swapped (model=<arch>) and the steps cut to EPOCHS x 300 optimiser steps (default 1 epoch:
# 300 steps, one validation at its end). The shipped stand-ins had 1,800 steps; these rows say their budget in
# their name (<arch>:<steps>steps).
#   choose: the threshold on the val split as the stand-ins' is chosen (0.2-0.6, every component kept, no gap
#           bridging, root-seeded: experiments/standins/run.sh), recorded in the checkpoint;
#   eval:   the test split through that threshold, traced root-seeded (APP2 from the mask voxel nearest the gold
#           root, the protocol of the SYNTHETIC Tables 1-2), merged into $OUT/<preset>_test.md; the card beside it;
#   table:  $OUT/<preset>_summary.md, one line per network beside the paper's F1 (neurorefiner study
#           equal-budget-table).
#
#   ARCHS="vnet sgsnet_style" PRESETS=synthetic_cwmbs_weak bash experiments/segmenters/run_standins_equal_budget.sh
#   STEPS=eval ARCHS=vnet bash experiments/segmenters/run_standins_equal_budget.sh     # score a trained run again
# Checkpoints go to the git-ignored checkpoints/runs/segment/<arch>_<steps>steps/<preset>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
export WANDB_MODE=offline OMP_NUM_THREADS=1
ARCHS=${ARCHS:-"vnet sgsnet_style gbpnet_style adtlnet_style unet3d nnunet_style swinunetr"}
PRESETS=${PRESETS:-synthetic_cwmbs_weak}
STEPS=${STEPS:-"train choose eval table"}
EPOCHS=${EPOCHS:-1}
case $EPOCHS in '' | *[!0-9]* | 0) echo "EPOCHS=$EPOCHS: a whole number of 300-step epochs, at least 1" >&2; exit 2 ;; esac
TAG="$((EPOCHS * 300))steps"
OUT=${OUT:-experiments/segmenters/standins_equal_budget}
for step in $STEPS; do  # refuse a misspelt step before hours of training run ahead of it
  case $step in train|choose|eval|table) ;; *) echo "unknown step $step (train, choose, eval, table)" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
for p in $PRESETS; do
  for a in $ARCHS; do
    run="checkpoints/runs/segment/${a}_$TAG/$p"
    ck="$run/segmenter.pt"
    for step in $STEPS; do
      [ "$step" = table ] && continue  # once per preset, after every network
      echo "=== $(date -u +%T) $a $p $step ($TAG)" >&2
      case $step in
        train)
          $PY train.py experiment="unet3d_${p}_cpu" model="$a" trainer.max_epochs="$EPOCHS" \
            trainer.check_val_every_n_epoch=1 segmentation.ckpt_dir="$run" segmentation.export_path="$ck" ;;
        choose)
          $NR make postprocess --dataset "$p" --arch "$a" --name "${a}_$TAG" --model "$ck" \
            --threshold 0.2 --threshold 0.3 --threshold 0.4 --threshold 0.5 --threshold 0.6 --bridge 0 --keep 0 \
            --protocol root_seeded --out "$OUT" --record ;;
        eval)
          inc=()
          [ -f "$OUT/${p}_test_cases.csv" ] && inc=(--include "$OUT/${p}_test_cases.csv")
          $NR make segmenter-rows --dataset "$p" --split test --segmenter "$a:$TAG=$ck" --no-naive \
            --protocol root_seeded --threads 1 "${inc[@]}" --out "$OUT" --stem "${p}_test" --plot
          $NR make segmenter-card "$ck" --out "$OUT/${p}_${a}_${TAG}_card.md" \
            --command "ARCHS=$a PRESETS=$p EPOCHS=$EPOCHS STEPS=train bash experiments/segmenters/run_standins_equal_budget.sh" \
            --title "$a on $p (SYNTHETIC), the stand-in recipe at $TAG" ;;
      esac
    done
  done
  case " $STEPS " in *" table "*) $NR study equal-budget-table --folder "$OUT" --preset "$p" ;; esac
done
