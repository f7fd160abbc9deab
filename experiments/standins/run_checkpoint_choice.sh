#!/usr/bin/env bash
# SYNTHETIC stand-ins (generated data, never BigNeuron/CWMBS/ZBFWB results): which stand-in U-Net to ship. During
# training the checkpoint is picked on label-centred val crops at threshold 0.5; here the candidates are chosen
# with their threshold on the whole val volumes, scored root-seeded as the tables score them: the shipped
# checkpoint (1,800 steps, the crop pick), a 300-step run with its own full schedule, and every epoch's snapshot
# of the 1,800-step run. The winner and the shipped checkpoint are then scored on fresh volumes (FRESH_SEED, never
# used by the project) against the issue's target.
#   train:  python train.py experiment=unet3d_<preset>_cpu (the shipped recipe; it keeps a snapshot every epoch;
#           not shipped here)
#   short:  the same recipe cut to 300 steps, learning rate decayed over them
#           (experiments/segmenters/run_standins_equal_budget.sh, ARCHS=unet3d, its train step)
#   choose: every candidate present x the stand-ins' threshold grid on the val split (neurorefiner make
#           postprocess); the winner is copied, its threshold recorded, to
#           checkpoints/runs/segment/unet3d_val_choice/<preset>/segmenter.pt
#   fresh:  the winner and the shipped checkpoint on the first FRESH_CASES fresh test volumes, root-seeded
#   table:  $OUT/summary.md (neurorefiner study checkpoint-choice-table)
#
#   PRESETS=synthetic_cwmbs_weak bash experiments/standins/run_checkpoint_choice.sh
#   STEPS="fresh table" FRESH_CASES=4 bash experiments/standins/run_checkpoint_choice.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
export WANDB_MODE=offline OMP_NUM_THREADS=1
PRESETS=${PRESETS:-"synthetic_cwmbs_weak synthetic_cwmbs_noise synthetic_bigneuron synthetic_zbfwb"}
STEPS=${STEPS:-"train short choose fresh table"}
FRESH_SEED=${FRESH_SEED:-2027}
FRESH_CASES=${FRESH_CASES:-8}
OUT=${OUT:-experiments/standins/checkpoint_choice}
for step in $STEPS; do  # refuse a misspelt step before hours of training run ahead of it
  case $step in train|short|choose|fresh|table) ;;
    *) echo "unknown step $step (train, short, choose, fresh, table)" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
for step in $STEPS; do
  for p in $PRESETS; do
    name="unet3d_${p}_cpu"
    chosen="checkpoints/runs/segment/unet3d_val_choice/$p/segmenter.pt"
    short="checkpoints/runs/segment/unet3d_300steps/$p/segmenter.pt"
    echo "=== $(date -u +%T) $p $step" >&2
    case $step in
      train)
        $PY train.py experiment="$name" ;;
      short)
        ARCHS=unet3d PRESETS="$p" STEPS=train PY="$PY" NR="$NR" bash experiments/segmenters/run_standins_equal_budget.sh ;;
      choose)
        models=(--model "shipped=checkpoints/segmenters/$name.pt")
        [ -e "$short" ] && models+=(--model "300steps=$short")
        for s in outputs/train/checkpoints/runs/segment/"$name"/snapshots/step*.pt; do
          [ -e "$s" ] && models+=(--model "$s")
        done
        $NR make postprocess --dataset "$p" --arch unet3d --name unet3d_candidates "${models[@]}" \
          --threshold 0.2 --threshold 0.3 --threshold 0.4 --threshold 0.5 --threshold 0.6 --bridge 0 --keep 0 \
          --protocol root_seeded --out "$OUT" --ship-to "$chosen" --record ;;
      fresh)
        for which in chosen shipped; do
          seg=unet3d
          [ "$which" = chosen ] && seg="$chosen"
          $PY evaluate.py dataset="$p" dataset.seed="$FRESH_SEED" dataset.root="data/cache/synth/${p}_fresh" \
            split=test methods=[initial] segmenter="$seg" protocols=[root_seeded] limit="$FRESH_CASES" \
            progress=false figures=false save_masks=false out_dir="$OUT/fresh/${p}_$which"
        done ;;
      table) ;;
    esac
  done
  [ "$step" = table ] && $NR study checkpoint-choice-table --folder "$OUT" $(for p in $PRESETS; do echo --preset "$p"; done)
done
