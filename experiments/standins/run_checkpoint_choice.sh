#!/usr/bin/env bash
# SYNTHETIC stand-ins (generated data, never BigNeuron/CWMBS/ZBFWB results): which checkpoint of the stand-in
# U-Net's training run to ship. During training the checkpoint is picked on label-centred val crops at threshold
# 0.5; here every epoch's snapshot is a candidate, chosen with its threshold on the whole val volumes, scored
# root-seeded as the tables score them. Both are then scored on fresh volumes (FRESH_SEED, never used by the
# project) against the issue's target.
#   train:  python train.py experiment=unet3d_<preset>_cpu (the shipped recipe; it keeps a snapshot every epoch;
#           not shipped here)
#   choose: every snapshot x the stand-ins' threshold grid on the val split (neurorefiner study choose-postprocess);
#           the winner is copied, its threshold recorded, to checkpoints/runs/segment/unet3d_snapshot_choice/<preset>/
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
STEPS=${STEPS:-"train choose fresh table"}
FRESH_SEED=${FRESH_SEED:-2027}
FRESH_CASES=${FRESH_CASES:-8}
OUT=${OUT:-experiments/standins/checkpoint_choice}
for step in $STEPS; do  # refuse a misspelt step before hours of training run ahead of it
  case $step in train|choose|fresh|table) ;; *) echo "unknown step $step (train, choose, fresh, table)" >&2; exit 2 ;; esac
done
mkdir -p "$OUT"
for step in $STEPS; do
  for p in $PRESETS; do
    name="unet3d_${p}_cpu"
    chosen="checkpoints/runs/segment/unet3d_snapshot_choice/$p/segmenter.pt"
    echo "=== $(date -u +%T) $p $step" >&2
    case $step in
      train)
        $PY train.py experiment="$name" ;;
      choose)
        models=()
        for s in outputs/train/checkpoints/runs/segment/"$name"/snapshots/step*.pt; do
          [ -e "$s" ] || { echo "no snapshots of $name (run the train step)" >&2; exit 2; }
          models+=(--model "$s")
        done
        $NR study choose-postprocess --dataset "$p" --arch unet3d --name unet3d_snapshots "${models[@]}" \
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
