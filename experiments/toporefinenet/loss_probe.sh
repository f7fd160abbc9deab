#!/usr/bin/env bash
# Loss probes of TopoRefineNet: each variant fine-tunes the shipped stage-1 checkpoint for the same budget
# (STEPS steps or CPU_MIN CPU-minutes, whichever comes first: a costlier loss gets fewer steps) on the stage-1
# sample shards (conf/experiment/toporefinenet_probe.yaml), one at a time, then all are
# scored on the same held-out defects (OP_6 and SYNTHETIC stacks, raw network:
# neurorefiner study training-probe). Writes outputs/toporefinenet_probes/<variant>/ (checkpoint,
# progress.json with steps and CPU seconds) and experiments/toporefinenet/results/loss_probe/<variant>.json.
# Needs the stage-1 shards (commands in conf/experiment/toporefinenet_probe.yaml) and, for the real breaks,
# the segmenters' DIADEM dev masks (neurorefiner init-masks --dataset diadem --split dev --segmenter S).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
STEPS=${STEPS:-150}
CPU_MIN=${CPU_MIN:-5.6}  # what 150 steps of the plain loss cost on the shared machine (2026-12-04)
OUT=${OUT:-outputs/toporefinenet_probes}
RESULTS=${RESULTS:-experiments/toporefinenet/results/loss_probe}
declare -A VARIANTS=(
  [mask_edit10]="model.residual=false model.edit_weight=10.0"
  [residual_edit10]="model.residual=true model.edit_weight=10.0"
  [residual_cldice]="model.residual=true model.edit_weight=10.0 model.cldice_weight=0.5"
  [residual_edit30]="model.residual=true model.edit_weight=30.0"
)
ORDER=${ORDER:-mask_edit10 residual_edit10 residual_edit30 residual_cldice}
SCORE=(shipped_stage1=checkpoints/toporefinenet_stage1.ckpt)
for name in $ORDER; do
  if [[ -n "${SCORE_ONLY:-}" ]]; then  # score what has finished (a variant cut short by the clock is left out)
    [[ -f $OUT/$name/toporefinenet_stage1.ckpt ]] && SCORE+=("$name=$OUT/$name/toporefinenet_stage1.ckpt")
    continue
  fi
  if [[ ! -f $OUT/$name/toporefinenet_stage1.ckpt ]]; then
    # shellcheck disable=SC2086
    nice -n 10 $PY train.py experiment=toporefinenet_probe "stages.1.max_steps=$STEPS" "+stages.1.max_cpu_minutes=$CPU_MIN" \
      "paths.checkpoint_dir=$OUT/$name" ${VARIANTS[$name]} > "$OUT.$name.log" 2>&1
    cp "$OUT/$name/runs/refine/toporefinenet_stage1/progress.json" "$OUT/$name/progress.json"
  fi
  SCORE+=("$name=$OUT/$name/toporefinenet_stage1.ckpt")
done
nice -n 10 $NR study training-probe --out "$RESULTS" --n ${N:-20} "${SCORE[@]}"
$NR study loss-probe-table --results "$RESULTS" --runs "$OUT"
