#!/usr/bin/env bash
# Issue 5: the baseline segmenters on SYNTHETIC presets (generated stand-ins, never BigNeuron/CWMBS/ZBFWB results).
#
#   STEP=train PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/synthetic_rows.sh
#   STEP=choose PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/synthetic_rows.sh  # val split picks
#   STEP=eval  PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/synthetic_rows.sh
#   STEP=floor PRESETS="synthetic_cwmbs_weak" bash experiments/segmenters/synthetic_rows.sh   # after eval
#   ARCH=nnunet_style STEP=train PRESETS=... bash experiments/segmenters/synthetic_rows.sh     # the other baseline
#   ARCH=vnet STEP=train PRESETS=... bash experiments/segmenters/synthetic_rows.sh             # any network of conf/model
#   ARCH=vnet STEP="train choose eval" PRESETS=... bash experiments/segmenters/synthetic_rows.sh  # steps in order, per preset
#   PRIOR=0.01 ARCH=gbpnet_style STEP="train choose eval" PRESETS=... bash ...  # the foreground-prior variant
#   SEED=1 [PRIOR=0.01] ARCH=vnet STEP="train choose card" PRESETS=... bash ...  # another seed, val split only
#
# Training: the preset's train split, its val split picks the checkpoint; exact label files (gold labels),
# percentile normalisation, the default 32x96x96 crops, batch 2, 256 steps (8 epochs x 32), one torch thread.
# ARCH=nnunet_style: the nnU-Net-style baseline with its CPU patch (16x64x64, as on DIADEM), planned from the
# preset's voxel spacing; its rows join the same tables (--include keeps the rows already there).
# The other networks (vnet, unetr, swinunetr, sgsnet_style, gbpnet_style, adtlnet_style; seventh round) train with
# the U-Net's recipe unchanged: 32x96x96 crops are multiples of 16/32, as UNETR's ViT and SwinUNETR need.
# eval and floor hold a lock per preset while they read the preset's table, add rows and write it back (two
# lanes merging at once would otherwise drop each other's rows); eval scores outside the lock (ninth round).
# Post-processing: STEP=choose picks threshold and gap bridging on the preset's val split (keep largest) and
# records it; without it, eval records the DIADEM U-Net's setting (threshold 0.6, keep largest), as in the third
# round. --raw adds threshold-only masks (every component, no bridging: what refinement starts from).
# STEP=card writes the training card (<preset>_<file>_card.md) from the checkpoint; eval writes it too.
# Rows: test split -> APP2 -> metrics; experiments/segmenters/synthetic/<preset>_test.md. STEP=floor adds the
# naive floor (Otsu + TEASAR / Otsu -> APP2, no network) to that table, keeping its U-Net rows (--include).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
STEP=${STEP:?STEP=train|choose|card|eval|floor, or several in order: STEP="train choose eval"}
PRESETS=${PRESETS:-"synthetic_cwmbs_weak synthetic_zbfwb"}
export WANDB_MODE=offline
ARCH=${ARCH:-unet3d}
PRIOR=${PRIOR:-}  # set: train with segmentation.module.foreground_prior=$PRIOR (tenth round), a variant of its own
SEED=${SEED:-}  # set: train with seed=$SEED (the recipe's is 0; eleventh round), a run of its own, val split only
TABLES=${TABLES:-experiments/segmenters/synthetic}  # where eval/floor write tables and cards
case $ARCH in
  unet3d|vnet|unetr|swinunetr|sgsnet_style|gbpnet_style|adtlnet_style) ARCH_ARGS=() ;;
  nnunet_style) ARCH_ARGS=(segmentation.data.patch_size=[16,64,64]) ;;
  *) echo "ARCH=$ARCH: not a segmenter of conf/model (unet3d vnet unetr swinunetr nnunet_style sgsnet_style" \
       "gbpnet_style adtlnet_style)" >&2; exit 2 ;;
esac
# A variant keeps its own checkpoint, val choice, card and table rows beside the plain network's:
# NAME labels its rows (rows.py's arch:variant), FILE names its files.
# SEED=<n> runs are for comparing recipes on the val split (prior_compare.py --seeds): they get a card but no
# test rows, which stay one per recipe (the seed-0 run's) so the tables do not pick the best of several seeds.
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
ckpt_of() { echo "checkpoints/runs/segment/$ARCH/$1_r3$RUN_SUFFIX/segmenter.pt"; }
for step in $STEP; do  # refuse a misspelt step before hours of training run ahead of it
  case $step in train|choose|card|eval|floor) ;; *) echo "unknown STEP=$step" >&2; exit 2 ;; esac
  if [ -n "$SEED" ] && { [ "$step" = eval ] || [ "$step" = floor ]; }; then
    echo "SEED=$SEED with STEP=$step: extra seeds are scored on the val split only (STEP=\"train choose card\")" >&2
    exit 2
  fi
done

merge_into_table() {  # merge_into_table PRESET ROWS_CSV
  # Under the preset's lock: read its table, put ROWS_CSV's rows first (they replace older rows of the same
  # method and case, e.g. a re-evaluated network's) and write it back.
  (
    flock 9
    inc=(); [ -f "$TABLES/$1_test_cases.csv" ] && inc=(--include "$TABLES/$1_test_cases.csv")
    $PY experiments/segmenters/rows.py --dataset "$1" --split test --no-naive --include "$2" "${inc[@]}" \
      --out "$TABLES"
  ) 9>"$(lock_of "$1")"
}

SCRATCH=""  # the scratch table being scored; removed on exit if a step fails before it is merged
trap 'if [ -n "$SCRATCH" ]; then rm -rf "$SCRATCH"; fi' EXIT

score_into_table() {  # score_into_table PRESET ROWS_ARGS...
  # Scoring (segmentation, APP2: most of a step) writes a table of its own outside the lock; only the merge
  # into the preset's table holds it, so two lanes can score one preset at the same time.
  local preset=$1
  shift
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/synthetic_rows.XXXXXX")
  OMP_NUM_THREADS=1 $PY experiments/segmenters/rows.py --dataset "$preset" --split test "$@" --threads 1 \
    --out "$SCRATCH" --stem rows
  merge_into_table "$preset" "$SCRATCH/rows_cases.csv"
  rm -rf "$SCRATCH"
  SCRATCH=""
}

run_step() {  # run_step PRESET STEP
  local preset=$1 ck card
  ck=$(ckpt_of "$preset")
  case $2 in
  train)
    $PY train.py task=segment model="$ARCH" dataset="$preset" segmentation.ckpt_dir="$(dirname "$ck")" \
      trainer.max_epochs=8 trainer.check_val_every_n_epoch=2 trainer.enable_progress_bar=false \
      "${ARCH_ARGS[@]}" ;;
  choose)
    # threshold x gap bridging on the preset's val split, recorded in the checkpoint (sixth round)
    $PY experiments/segmenters/synthetic/choose_postprocess.py --dataset "$preset" --arch "$ARCH" --name "$FILE" \
      --model "$ck" --record ;;
  eval)
    if [ ! -f "experiments/segmenters/synthetic/${preset}_${FILE}_postprocess_val.json" ]; then
      # no STEP=choose yet: the third round's stand-in, the DIADEM U-Net's setting
      $PY -c "from neurorefiner.inference.segmenter import PostProcess, record_postprocess; \
record_postprocess('$ck', PostProcess(0.6, 0, 1), 'not chosen on these data: the DIADEM CPU 3D U-Net setting \
(DIADEM OP_6, experiments/segmenters/postprocess_dev_OP_6_tiebreak.md)')"
    fi
    # --no-naive: the floor comes from STEP=floor (it merges these rows; run it after this step).
    score_into_table "$preset" --segmenter "$NAME=$ck" --raw --no-naive
    run_step "$preset" card ;;
  card)
    card="$TABLES/${preset}_${FILE}_card.md"  # written whole or not at all
    $PY -c "from neurorefiner.training.segmenter import provenance_markdown as p; \
print(p('$ck', '${SEED:+SEED=$SEED }${PRIOR:+PRIOR=$PRIOR }ARCH=$ARCH STEP=train PRESETS=$preset bash experiments/segmenters/synthetic_rows.sh', \
'$NAME${SEED:+ seed $SEED} on $preset (SYNTHETIC), 256 steps'))" > "$card.part"
    mv "$card.part" "$card" ;;
  floor)
    # ~2.5 min (256^3) / ~4 min (128x512x512) per volume on one thread: the Otsu mask is a noise sponge of
    # ~40% of the volume (see neurorefiner/models/segmenters/naive.py on fix_branching)
    score_into_table "$preset" ;;
  esac
}

for preset in $PRESETS; do
  for step in $STEP; do
    echo "=== $(date -u +%T) $ARCH $preset $step" >&2
    run_step "$preset" "$step"
  done
done
