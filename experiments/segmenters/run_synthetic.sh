#!/usr/bin/env bash
# The baseline segmenters on the SYNTHETIC presets (generated stand-ins, never BigNeuron/CWMBS/ZBFWB results):
# train, choose post-processing on the val split, score the test split, write the card, add the naive floor.
#
#   STEP="train choose eval" PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/run_synthetic.sh
#   STEP=floor PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/run_synthetic.sh   # after eval
#   ARCH=vnet STEP="train choose eval" PRESETS=... bash ...          # any segmenter of conf/model
#   PRIOR=0.01 ARCH=gbpnet_style STEP="train choose eval" PRESETS=... bash ...  # the foreground-prior variant
#   SEED=1 [PRIOR=0.01] ARCH=vnet STEP="train choose card" PRESETS=... bash ...  # another seed, val split only
#
# Training: the preset's train split, its val split picks the checkpoint; gold labels, percentile normalisation,
# 32x96x96 crops (nnunet_style: 16x64x64), batch 2, 256 steps (8 epochs x 32), one torch thread.
# choose: threshold x gap bridging on the val split (neurorefiner make postprocess), recorded in the checkpoint.
# eval: the test split through the recorded post-processing (and threshold-only masks, --raw) into
# $TABLES/<preset>_test.md; floor: the naive floor into the same table. Scoring runs outside a per-preset lock;
# only the merge into the preset's table holds it, so two lanes can score one preset at once.
# card: <preset>_<file>_card.md from the checkpoint (eval writes it too).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
STEP=${STEP:?STEP=train|choose|card|eval|floor, or several in order: STEP="train choose eval"}
PRESETS=${PRESETS:-"synthetic_cwmbs_weak synthetic_zbfwb"}
export WANDB_MODE=offline
ARCH=${ARCH:-unet3d}
PRIOR=${PRIOR:-}  # set: train with segmentation.module.foreground_prior=$PRIOR, a variant of its own
SEED=${SEED:-}  # set: train with seed=$SEED (the recipe's is 0), a run of its own, val split only
TABLES=${TABLES:-experiments/segmenters/synthetic}  # where choose/eval/floor/card write
case $ARCH in
  unet3d|vnet|unetr|swinunetr|sgsnet_style|gbpnet_style|adtlnet_style) ARCH_ARGS=() ;;
  nnunet_style) ARCH_ARGS=(segmentation.data.patch_size=[16,64,64]) ;;
  *) echo "ARCH=$ARCH: not a segmenter of conf/model (unet3d vnet unetr swinunetr nnunet_style sgsnet_style" \
       "gbpnet_style adtlnet_style)" >&2; exit 2 ;;
esac
# A variant keeps its own checkpoint, val choice, card and rows: NAME labels its rows (arch:variant), FILE its files.
# SEED=<n> runs compare recipes on the val split (prior_compare_*.md; README.md, retired studies): a card, no test rows,
# so the tables hold one row per recipe (the seed-0 run's) and never the best of several seeds.
NAME=$ARCH FILE=$ARCH RUN_SUFFIX=""
if [ -n "$SEED" ]; then
  case $SEED in *[!0-9]*) echo "SEED=$SEED: not a whole number" >&2; exit 2 ;; esac
  if [ "$((10#$SEED))" -eq 0 ]; then
    echo "SEED=$SEED is the recipe's own seed: leave SEED unset for that run (its files carry no seed)" >&2; exit 2
  fi
  ARCH_ARGS+=(seed="$SEED")
  FILE="${ARCH}_seed$SEED" RUN_SUFFIX="_seed$SEED"
fi
if [ -n "$PRIOR" ]; then
  ARCH_ARGS+=(segmentation.module.foreground_prior="$PRIOR")
  NAME="$ARCH:prior" FILE="${FILE}_prior" RUN_SUFFIX="${RUN_SUFFIX}_prior"
fi
lock_of() { echo "$TABLES/.$1.lock"; }  # one table writer per preset (git-ignored)
ckpt_of() { echo "checkpoints/runs/segment/$ARCH/$1$RUN_SUFFIX/segmenter.pt"; }
for step in $STEP; do  # refuse a misspelt step before hours of training run ahead of it
  case $step in train|choose|card|eval|floor) ;; *) echo "unknown STEP=$step" >&2; exit 2 ;; esac
  if [ -n "$SEED" ] && { [ "$step" = eval ] || [ "$step" = floor ]; }; then
    echo "SEED=$SEED with STEP=$step: extra seeds are scored on the val split only (STEP=\"train choose card\")" >&2
    exit 2
  fi
done

merge_into_table() {  # merge_into_table PRESET ROWS_CSV: under the preset's lock, ROWS_CSV's rows first
  (
    flock 9
    inc=(); [ -f "$TABLES/$1_test_cases.csv" ] && inc=(--include "$TABLES/$1_test_cases.csv")
    $NR make segmenter-rows --dataset "$1" --split test --no-naive --include "$2" "${inc[@]}" --out "$TABLES"
  ) 9>"$(lock_of "$1")"
}

SCRATCH=""  # the scratch table being scored; removed on exit if a step fails before it is merged
trap 'if [ -n "$SCRATCH" ]; then rm -rf "$SCRATCH"; fi' EXIT

score_into_table() {  # score_into_table PRESET ROWS_ARGS...: score into a scratch table, then merge it
  local preset=$1
  shift
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/run_synthetic.XXXXXX")
  OMP_NUM_THREADS=1 $NR make segmenter-rows --dataset "$preset" --split test "$@" --threads 1 --out "$SCRATCH" --stem rows
  merge_into_table "$preset" "$SCRATCH/rows_cases.csv"
  rm -rf "$SCRATCH"
  SCRATCH=""
}

run_step() {  # run_step PRESET STEP
  local preset=$1 ck
  ck=$(ckpt_of "$preset")
  case $2 in
  train)
    $PY train.py task=segment model="$ARCH" dataset="$preset" segmentation.ckpt_dir="$(dirname "$ck")" \
      trainer.max_epochs=8 trainer.check_val_every_n_epoch=2 trainer.enable_progress_bar=false \
      "${ARCH_ARGS[@]}" ;;
  choose)
    $NR make postprocess --dataset "$preset" --arch "$ARCH" --name "$FILE" --model "$ck" --out "$TABLES" \
      --record ;;
  eval)
    if [ ! -f "$TABLES/${preset}_${FILE}_postprocess_val.json" ]; then
      echo "no post-processing chosen for $FILE on $preset: run STEP=choose first" >&2; exit 2
    fi
    # --no-naive: the floor comes from STEP=floor (it merges these rows; run it after this step)
    score_into_table "$preset" --segmenter "$NAME=$ck" --raw --no-naive
    run_step "$preset" card ;;
  card)
    $NR make segmenter-card "$ck" --out "$TABLES/${preset}_${FILE}_card.md" \
      --command "${SEED:+SEED=$SEED }${PRIOR:+PRIOR=$PRIOR }ARCH=$ARCH STEP=train PRESETS=$preset bash experiments/segmenters/run_synthetic.sh" \
      --title "$NAME${SEED:+ seed $SEED} on $preset (SYNTHETIC), 256 steps" ;;
  floor)
    # minutes per volume on one thread: the Otsu mask is a noise sponge of ~40% of the volume
    score_into_table "$preset" ;;
  esac
}

for preset in $PRESETS; do
  for step in $STEP; do
    echo "=== $(date -u +%T) $ARCH $preset $step" >&2
    run_step "$preset" "$step"
  done
done
