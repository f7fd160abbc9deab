#!/usr/bin/env bash
# The CPU budget run scored part-way, and the loss that prices unasked changes (README.md, "The CPU budget").
# 1. Two forks of the budget run at 9,993 steps (checkpoints/resume/toporefinenet_stage1_budget/weights_9993.ckpt,
#    weights only), 1,500 steps each on the stage-1 shards, constant lr 5e-4, fresh AdamW: `control` keeps the
#    run's loss (residual, edit weight 10); `film` / `faint_film` add the decoder FiLM (model.net.text_film); `negative` adds negative_weight=10 (CE price of a change inside the
#    named region of a no-change sample) and batch_dice=true. Run side by side, one torch thread each.
# 2. The training probe (neurorefiner study training-probe) on the same held-out defects: OP_6 and
#    SYNTHETIC stacks, both DIADEM segmenters' OP_6 masks and both cwmbs_weak stand-ins' masks of the SYNTHETIC
#    stacks for real breaks and noise, raw network at change thresholds 0.5 / 0.7 / 0.9.
# Needs the stage-1 shards (conf/experiment/toporefinenet_cpu_budget.yaml) and the DIADEM segmenters' dev masks
# (neurorefiner init-masks --dataset diadem --split dev --segmenter S). BUDGET=<a later last.ckpt> adds it to the
# scoring as `budget_now` (BUDGET_LABEL= names it in the table). Writes results/budget_probe/<name>.json and summary.md.
# The committed table: BUDGET=checkpoints/resume/toporefinenet_stage1_budget/last.ckpt (14,722 steps)
#   BUDGET_LABEL="budget run, its latest last.ckpt (BUDGET=): 14,722 steps, 3.96 CPU-h"
#   BUDGET_FAINT=checkpoints/resume/toporefinenet_stage1_budget_faint/last.ckpt (phase 2, 3,821 steps)
#   BUDGET_FAINT_LABEL="phase 2 (faint shards) at 3,821 steps, +0.68 CPU-h"
#   BUDGET_FILM=checkpoints/resume/toporefinenet_stage1_budget_film/last.ckpt (phase 3, 7,230 steps)
#   BUDGET_FILM_LABEL="phase 3 (faint shards, text_film) at 7,230 steps, +1.37 CPU-h (6.02 in all)"
#   BUDGET_GATE=checkpoints/resume/toporefinenet_stage1_budget_gate/last.ckpt (phase 4, 9,555 steps)
#   BUDGET_GATE_LABEL="phase 4 (faint shards, text_film, edit_gate) at 9,555 steps, +1.84 CPU-h (8.14 in all with stage 2)"
set -euo pipefail
source "$(dirname "$0")/forks.sh"
OUT=${OUT:-outputs/toporefinenet_forks}
RESULTS=experiments/toporefinenet/results/budget_probe
mkdir -p "$OUT"
fork control &
fork negative model.negative_weight=10 model.batch_dice=true &
wait
# faint gaps: the control's settings on shards where half the breaks are faint across the gap (contrast 0.1-0.6 of
# the neurite's), made by the two make-shards lines with --faint-gap 0.5 into data/cache/shards/stage1_faint
for part in "train --n 4096" "val --n 256 --seed 1"; do
  set -- $part
  [[ -f data/cache/shards/stage1_faint/$1/manifest.json ]] || .venv/bin/neurorefiner make-shards --stage 1 \
    --dataset diadem --part "$@" --faint-gap 0.5 --out "data/cache/shards/stage1_faint/$1"
done
fork faint "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint"
fork faint_negative "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint" model.negative_weight=10 \
  model.batch_dice=true
# the instruction at every decoder level (model.net.text_film: FiLM, zero-initialised, so the forks start from the
# same function as the others): the control's and the faint fork's settings otherwise, side by side
fork film model.net.text_film=true &
fork faint_film "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint" model.net.text_film=true &
wait
# faint_film with each read's hard negative drawn anew and one-place opposites (fresh_variants, mixed_opposites)
fork faint_film_paired "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint" model.net.text_film=true \
  +stages.1.datamodule.fresh_variants=true +stages.1.datamodule.mixed_opposites=true
# faint_film with the block-level edit gate (model.net.edit_gate: "does the instruction apply here", its own BCE)
fork faint_film_gate "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint" model.net.text_film=true \
  model.net.edit_gate=true
# and 1,500 steps more of it (from its own checkpoint, fresh optimiser)
[[ -f $OUT/faint_film_gate_3000/toporefinenet_stage1.ckpt ]] || $PY train.py experiment=toporefinenet_probe \
  "stages.1.init_from=$PWD/$OUT/faint_film_gate/toporefinenet_stage1.ckpt" stages.1.max_steps=1500 \
  stages.1.datamodule.samples_per_epoch=3000 model.residual=true +model.cosine=false model.net.text_film=true \
  model.net.edit_gate=true "paths.checkpoint_dir=$PWD/$OUT/faint_film_gate_3000" \
  "stages.1.datamodule.shards=$PWD/data/cache/shards/stage1_faint" > "$OUT.faint_film_gate_3000.log" 2>&1
SCORE=(shipped_stage1=checkpoints/toporefinenet_stage1.ckpt shipped_two_stage=checkpoints/toporefinenet.ckpt
       budget_9993=$START control=$OUT/control/toporefinenet_stage1.ckpt
       negative=$OUT/negative/toporefinenet_stage1.ckpt faint=$OUT/faint/toporefinenet_stage1.ckpt
       faint_negative=$OUT/faint_negative/toporefinenet_stage1.ckpt film=$OUT/film/toporefinenet_stage1.ckpt
       faint_film=$OUT/faint_film/toporefinenet_stage1.ckpt
       faint_film_paired=$OUT/faint_film_paired/toporefinenet_stage1.ckpt
       faint_film_gate=$OUT/faint_film_gate/toporefinenet_stage1.ckpt
       faint_film_gate_3000=$OUT/faint_film_gate_3000/toporefinenet_stage1.ckpt
       gate_3677=checkpoints/resume/toporefinenet_stage1_budget_gate/weights_3677.ckpt
       budget_stage2=checkpoints/toporefinenet_budget.ckpt)
NOW=()
[[ -n "${BUDGET:-}" ]] && SCORE+=("budget_now=$BUDGET") && NOW=(budget_now="${BUDGET_LABEL:-budget run, its latest last.ckpt (BUDGET=)}")
[[ -n "${BUDGET_FAINT:-}" ]] && SCORE+=("budget_faint_now=$BUDGET_FAINT") &&
  NOW+=(budget_faint_now="${BUDGET_FAINT_LABEL:-phase 2 (faint shards), its latest last.ckpt (BUDGET_FAINT=)}")
[[ -n "${BUDGET_FILM:-}" ]] && SCORE+=("budget_film_now=$BUDGET_FILM") &&
  NOW+=(budget_film_now="${BUDGET_FILM_LABEL:-phase 3 (faint shards, text_film), its latest last.ckpt (BUDGET_FILM=)}")
[[ -n "${BUDGET_GATE:-}" ]] && SCORE+=("budget_gate_now=$BUDGET_GATE") &&
  NOW+=(budget_gate_now="${BUDGET_GATE_LABEL:-phase 4 (faint shards, text_film, edit_gate), its latest last.ckpt (BUDGET_GATE=)}")
$NR study training-probe --out "$RESULTS" --n 20 --thresholds 0.5,0.7,0.9 \
  --standin-segmenters unet3d,nnunet_style "${SCORE[@]}"
RESULTS="$RESULTS" NOW_LABELS="$(printf '%s\n' "${NOW[@]}")" bash experiments/toporefinenet/budget_probe_table.sh
# the operation gate (the decoding's rule: a connect or repair only adds, a remove only deletes) on faint_film
$NR study training-probe --out "${RESULTS}_gated" --n 20 --thresholds 0.5,0.9 \
  --operation-gate --standin-segmenters unet3d,nnunet_style faint_film=$OUT/faint_film/toporefinenet_stage1.ckpt
