#!/usr/bin/env bash
# The device-tool run of TopoRefineNet (under 8 minutes on one GPU): the sample shards of both stages made in
# parallel on the machine's cores (`neurorefiner make-shards`; the segmenters' DIADEM dev masks made on the GPU
# first when not carried), stage 1 then stage 2 read from them (bf16, paper-size crops 64 x 128 x 128, batch 8,
# the loss the CPU probes chose: LOSS), the instruction-following study, and a card per checkpoint. The
# recipes are experiment=paper_scale_toporefinenet_stage1 / _stage2 (conf/experiment/; on a GPU machine of
# your own just run `python train.py experiment=paper_scale_toporefinenet_stage1`, and see
# docs/training_at_scale.md for DDP and Slurm). What only this script says: preparing a device image that
# cannot pip-install (--prepare), hard wall budgets per stage, the evaluation, and the provenance card.
# Writes into $OUT:
#   toporefinenet_stage1.ckpt (+ .json metrics), toporefinenet_stage2.ckpt (+ .json) if stage 2 ran,
#   cards/toporefinenet_gpu.ckpt + .md (the final checkpoint with its card: neurorefiner refiner-card),
#   toporefinenet_gpu.md (provenance: commands, data, steps, wall time, validation figures, and the
#   instruction-following table of `neurorefiner study instructions`), train.log,
#   logs.tar.gz (metrics CSVs, per-sample evaluation rows)
#
# Two steps.
#   1. Here (CPU machine, once):      bash scripts/gpu_train_toporefinenet.sh --prepare
#      copies the pure-Python packages the GPU image lacks (hydra-core, omegaconf, antlr4, monai) into
#      .gpu_deps/site, fetches the cp312 wheels of connected-components-3d, dijkstra3d and edt into .gpu_deps/whl, and fills
#      the text-embedding cache with every instruction of the grammar (so no language model is needed
#      there). .gpu_deps/ is git-ignored through .git/info/exclude.
#   2. On the device (run tool):      command: bash scripts/gpu_train_toporefinenet.sh
#      carry: [".gpu_deps", "data/cache/text_embeddings", "data/cache/init_masks_dev"]; timeout_s: 480
#      (init_masks_dev = the CPU segmenters' masks of DIADEM OP_1-OP_6, made by
#      `neurorefiner init-masks --dataset diadem --split dev --segmenter S --out data/cache/init_masks_dev/diadem/S`
#      for S = unet3d, nnunet_style, as in checkpoints/toporefinenet.md; without it stage 2 is skipped)
# Knobs (environment), each overriding the experiments only when set: STEPS1, STEPS2, BATCH, CROP ("[64,128,128]",
#   z,y,x), WORKERS; and INIT_MASKS (data/cache/init_masks_dev), EVAL_N (64 evaluation defects), TIME1 / TIME2
#   (hard wall limits per stage, "00:00:02:30" / "00:00:01:15"), ACCEL (gpu), PRECISION (bf16-mixed),
#   PY (python3), EXTRA (more Hydra overrides for both stages); the data engine: DATASET (diadem), SEGMENTERS
#   ("unet3d nnunet_style"), N1 / N2 (4096 / 3072 training samples), NVAL (256), SHARDS (/tmp/nr_shards),
#   SHARD_WORKERS (all cores), MAKE_MASKS (1: make missing segmenter masks first); LOSS (Hydra overrides of
#   the loss, the probes' choice by default: experiments/toporefinenet/loss_probe.md), ARCH (network overrides:
#   the instruction at every decoder level by default; "" = the paper's network), FAINT_GAP (share of stage-1
#   breaks made faint across the gap, 0.5; experiments/toporefinenet/README.md); for several runs side by side
#   (scripts/gpu_train_editor_variants.sh): SHARDS_READY=1 (the shards exist: skip making them), LOG_ROOT (this
#   run's own paths.log_dir, so runs started in the same second never share a Hydra folder), ONE_STAGE=1 (no
#   stage 1: stage 2 from scratch on the mined samples alone for TIME1 + TIME2, Table 6's one-stage row).
# CPU smoke test (tests/integration/test_gpu_recipe.py runs it on the tiny dataset):
#   ACCEL=cpu PRECISION=32 STEPS1=2 STEPS2=2 BATCH=2 CROP="[16,32,32]" WORKERS=0 N1=8 N2=8 NVAL=4 \
#   OUT=/tmp/gpu_smoke PY=.venv/bin/python bash scripts/gpu_train_toporefinenet.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [[ "${1:-}" == "--prepare" ]]; then
  PY=${PY:-.venv/bin/python}
  grep -qx "/.gpu_deps/" .git/info/exclude 2>/dev/null || echo "/.gpu_deps/" >> .git/info/exclude
  SP=$($PY -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  rm -rf .gpu_deps/site && mkdir -p .gpu_deps/site .gpu_deps/whl
  for p in hydra omegaconf antlr4 monai; do cp -r "$SP/$p" .gpu_deps/site/; done
  find .gpu_deps/site -name __pycache__ -type d -prune -exec rm -rf {} +
  for dist in connected-components-3d dijkstra3d edt; do  # compiled: cp312 wheels of the versions used here
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d .gpu_deps/whl "$dist==$($PY -c "import importlib.metadata as m; print(m.version('$dist'))")"
  done
  PROJECT_ROOT=$ROOT HF_HUB_OFFLINE=1 $PY scripts/warm_text_cache.py
  du -sh .gpu_deps data/cache/text_embeddings
  exit 0
fi

OUT=${OUT:-$ROOT/outputs/gpu_toporefinenet}
PY=${PY:-python3}
CROP_SHOWN=${CROP:-[64,128,128]}; BATCH_SHOWN=${BATCH:-8}
TIME1=${TIME1:-00:00:02:30}; TIME2=${TIME2:-00:00:01:15}
ACCEL=${ACCEL:-gpu}; PRECISION=${PRECISION:-bf16-mixed}; EXTRA=${EXTRA:-}
DATASET=${DATASET:-diadem}; SEGMENTERS=${SEGMENTERS:-unet3d nnunet_style}
N1=${N1:-4096}; N2=${N2:-3072}; NVAL=${NVAL:-256}; SHARDS=${SHARDS:-/tmp/nr_shards}
SHARD_WORKERS=${SHARD_WORKERS:-$(nproc)}; MAKE_MASKS=${MAKE_MASKS:-1}
SHARDS_READY=${SHARDS_READY:-0}; ONE_STAGE=${ONE_STAGE:-0}; LOG_ROOT=${LOG_ROOT:-$ROOT/outputs}
LOSS=${LOSS:-model.residual=true model.edit_weight=10.0 model.swap_instruction_prob=0.0}
ARCH=${ARCH-model.net.text_film=true}; FAINT_GAP=${FAINT_GAP:-0.5}
mkdir -p "$OUT"
export PROJECT_ROOT=$ROOT HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1
if [[ -d .gpu_deps/site ]]; then
  if ls .gpu_deps/whl/*.whl >/dev/null 2>&1 && ! $PY -c "import cc3d, dijkstra3d, edt" 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu_site .gpu_deps/whl/*.whl
  fi
  export PYTHONPATH=$ROOT:$ROOT/.gpu_deps/site:/tmp/gpu_site:${PYTHONPATH:-}
else
  export PYTHONPATH=$ROOT:${PYTHONPATH:-}
fi
LOG=$OUT/train.log
: > "$LOG"
DEVICE=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo "cpu") | head -1)
NR=($PY -c "from neurorefiner.cli.main import app; app()")
CROP_CSV=$(echo "$CROP_SHOWN" | tr -d '[] ')
CACHE=${NEUROREFINER_CACHE:-$ROOT/data/cache}
INIT_MASKS=${INIT_MASKS:-$CACHE/init_masks_dev}  # segmenter masks of the TRAINING split (dev for DIADEM)
TS=$(date +%s)

# -- the data engine: segmenter masks (GPU), then both stages' shards on every core
SPLIT=dev; [[ "$DATASET" != diadem ]] && SPLIT=train
MASK_DEV=cpu; [[ "$ACCEL" == gpu ]] && MASK_DEV=cuda
SEG_ARGS=()
for S in $SEGMENTERS; do
  SEG_ARGS+=(--segmenter "$S")
  if [[ "$MAKE_MASKS" == 1 ]] && ! compgen -G "$INIT_MASKS/$DATASET/$S/*.tif" >/dev/null; then
    for SP in $SPLIT $([[ "$SPLIT" == train ]] && echo val); do
      echo "== masks: $S $SP" | tee -a "$LOG"
      "${NR[@]}" init-masks --dataset "$DATASET" --split "$SP" --segmenter "$S" --device $MASK_DEV \
        --out "$INIT_MASKS/$DATASET/$S" 2>&1 | tail -n 2 | tee -a "$LOG" || true
    done
  fi
done
shards() {  # stage, part, n, seed
  local faint=(); [[ "$1" == 1 ]] && faint=(--faint-gap "$FAINT_GAP")
  "${NR[@]}" make-shards --stage "$1" --part "$2" --n "$3" --seed "$4" --dataset "$DATASET" --crop "$CROP_CSV" \
    --workers "$SHARD_WORKERS" --shard-size 128 --out "$SHARDS/stage$1/$2" --init-masks-root "$INIT_MASKS" \
    "${SEG_ARGS[@]}" "${faint[@]}" 2>&1 | tail -n 1 | tee -a "$LOG"
}
HAVE2=no
if [[ "$SHARDS_READY" == 1 ]]; then
  echo "== shards ready at $SHARDS" | tee -a "$LOG"
  [[ -f $SHARDS/stage2/train/manifest.json ]] && HAVE2=yes
else
  echo "== shards -> $SHARDS" | tee -a "$LOG"
  shards 1 train "$N1" 0 && shards 1 val "$NVAL" 1
  if compgen -G "$INIT_MASKS/$DATASET/*/*.tif" >/dev/null && shards 2 train "$N2" 0 && shards 2 val "$NVAL" 1; then
    HAVE2=yes
  fi
fi
T0=$(date +%s)

COMMON=(trainer.accelerator=$ACCEL trainer.precision=$PRECISION "paths.checkpoint_dir=$OUT" "paths.log_dir=$LOG_ROOT")
knobs() {  # the Hydra overrides of the set knobs for stage $1
  [[ -n "${BATCH:-}" ]] && echo "stages.$1.datamodule.batch_size=$BATCH"
  [[ -n "${CROP:-}" ]] && echo "stages.$1.datamodule.crop_size=$CROP"
  [[ -n "${WORKERS:-}" ]] && echo "stages.$1.datamodule.num_workers=$WORKERS"
  local steps="STEPS$1"
  [[ -n "${!steps:-}" ]] && echo "stages.$1.max_steps=${!steps}"
  return 0
}
mapfile -t KNOBS1 < <(knobs 1)
mapfile -t KNOBS2 < <(knobs 2)
# shellcheck disable=SC2206
EXTRA_ARGS=($EXTRA)
# shellcheck disable=SC2206
LOSS_ARGS=($LOSS $ARCH)
CMD1=($PY train.py experiment=paper_scale_toporefinenet_stage1 "dataset=$DATASET" "${COMMON[@]}" ${KNOBS1[@]+"${KNOBS1[@]}"}
      "stages.1.datamodule.shards=$SHARDS/stage1" "${LOSS_ARGS[@]}"
      "+trainer.max_time=$TIME1" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"})
if [[ "$ONE_STAGE" == 1 ]]; then
  CMD1=()
  echo "== stage 1 skipped (ONE_STAGE=1): stage 2 from scratch for $TIME1 + $TIME2" | tee -a "$LOG"
  TIME2=$($PY -c "import sys; t=[sum(int(p)*m for p,m in zip(a.split(':'),(86400,3600,60,1))) for a in sys.argv[1:]]; \
s=sum(t); print(f'{s//86400:02d}:{s%86400//3600:02d}:{s%3600//60:02d}:{s%60:02d}')" "$TIME1" "$TIME2")
  STEPS2=$(( ${STEPS1:-0} + ${STEPS2:-0} )); [[ "$STEPS2" == 0 ]] && unset STEPS2
  mapfile -t KNOBS2 < <(knobs 2)
  INIT2=("stages.2.init_from=null" "stages.2.datamodule.replay_prob=0.0")
else
  echo "== stage 1: ${CMD1[*]}" | tee -a "$LOG"
  "${CMD1[@]}" 2>&1 | tee -a "$LOG"
  INIT2=("stages.2.init_from=$OUT/toporefinenet_stage1.ckpt")
fi
T1=$(date +%s)

RAN2=no
if [[ "$HAVE2" == yes ]]; then
  CMD2=($PY train.py experiment=paper_scale_toporefinenet_stage2 "dataset=$DATASET" "${COMMON[@]}" ${KNOBS2[@]+"${KNOBS2[@]}"}
        "+trainer.max_time=$TIME2" "${INIT2[@]}"
        "stages.2.datamodule.shards=$SHARDS/stage2" "stages.2.datamodule.replay_shards=$SHARDS/stage1"
        "stages.2.datamodule.init_masks_root=$INIT_MASKS" "${LOSS_ARGS[@]}" ${EXTRA_ARGS[@]+"${EXTRA_ARGS[@]}"})
  echo "== stage 2: ${CMD2[*]}" | tee -a "$LOG"
  if "${CMD2[@]}" 2>&1 | tee -a "$LOG"; then RAN2=yes; else RAN2="failed (see train.log)"; fi
else
  echo "== stage 2 skipped: no training-split segmenter masks under $INIT_MASKS/$DATASET/<segmenter>/" | tee -a "$LOG"
fi
T2=$(date +%s)
# instruction-following evidence on the final checkpoint (held-out synthetic defects, same crop size)
FINAL=$OUT/toporefinenet_stage1.ckpt; [[ "$RAN2" == yes ]] && FINAL=$OUT/toporefinenet_stage2.ckpt
EVAL_DEV=cpu; [[ "$ACCEL" == gpu ]] && EVAL_DEV=cuda
CMD3=("${NR[@]}" study instructions --ckpt "$FINAL" --n ${EVAL_N:-64} --device $EVAL_DEV
      --out "$OUT/eval" "stages.1.datamodule.crop_size=$CROP_SHOWN" "dataset=$DATASET")
echo "== eval: ${CMD3[*]}" | tee -a "$LOG"
"${CMD3[@]}" 2>&1 | tail -n 20 | tee -a "$LOG" || echo "eval failed (see train.log)" | tee -a "$LOG"
T3=$(date +%s)
# the card of the final checkpoint: what it was trained on, by which lines
CARD_ARGS=()
[[ "$ONE_STAGE" != 1 ]] && CARD_ARGS+=(--stage1 paper_scale_toporefinenet_stage1)
[[ "$RAN2" == yes ]] && CARD_ARGS+=(--stage2 paper_scale_toporefinenet_stage2)
"${NR[@]}" refiner-card --src "$OUT" "${CARD_ARGS[@]}" --name toporefinenet_gpu --dst "$OUT/cards" \
  --data "sample shards of $DATASET (stage 1: synthetic defects in the training cases' gold; stage 2: the errors of $SEGMENTERS on the training cases), $N1 / $N2 samples at $CROP_SHOWN, stage-1 faint-gap share $FAINT_GAP; loss: $LOSS; network: ${ARCH:-as the paper}" \
  --machine "$DEVICE, $PRECISION" --provenance "scripts/gpu_train_toporefinenet.sh" 2>&1 | tail -n 2 | tee -a "$LOG" \
  || echo "card failed (see train.log)" | tee -a "$LOG"
# logs travel as one archive: the device run returns at most 8 files
mkdir -p "$OUT/logs"
n=0
for f in $(ls -t "$LOG_ROOT"/train/refine/*/csv/version_*/metrics.csv 2>/dev/null | head -2); do
  n=$((n + 1)); cp "$f" "$OUT/logs/metrics_run$n.csv"
done
[[ -f $OUT/eval/rows.csv ]] && cp "$OUT/eval/rows.csv" "$OUT/logs/eval_rows.csv"
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"

{
  echo "# TopoRefineNet trained on $DEVICE"
  echo
  echo "Written by \`scripts/gpu_train_toporefinenet.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo "Data ($DATASET): stage 1 = $N1 synthetic defects (connect / remove / cut, with wrong-place and opposite"
  echo "hard negatives) in the gold of the training cases; stage 2 = $N2 errors of the segmenters ($SEGMENTERS)"
  echo "on the training cases ($HAVE2); validation on the held-out case(s); DIADEM OP_7-OP_9 never used. Stage 2: $RAN2."
  echo "Crops (z, y, x) $CROP_SHOWN, batch $BATCH_SHOWN, CPU-size network (conf/model/toporefinenet.yaml; ${ARCH:-as the paper}), loss: $LOSS, stage-1 faint-gap share $FAINT_GAP."
  echo
  echo "## Commands"
  echo '```'
  [[ ${#CMD1[@]} -gt 0 ]] && echo "${CMD1[*]}"
  [[ "$RAN2" != no ]] && echo "${CMD2[*]}"
  echo '```'
  echo
  echo "## Wall time"
  echo "- masks and shards: $((T0 - TS)) s"
  echo "- stage 1: $((T1 - T0)) s (includes start-up and final validation)"
  [[ "$RAN2" != no ]] && echo "- stage 2: $((T2 - T1)) s"
  echo "- evaluation: $((T3 - T2)) s"
  echo
  echo "## Validation figures (final, fixed validation set)"
  for s in 1 2; do
    j=$OUT/toporefinenet_stage$s.json
    [[ -f $j ]] && { echo "### stage $s"; echo '```json'; cat "$j"; echo; echo '```'; }
  done
  echo
  echo "## Instruction following (\`${CMD3[*]}\`)"
  echo
  [[ -f $OUT/eval/summary.md ]] && cat "$OUT/eval/summary.md"
} > "$OUT/toporefinenet_gpu.md"
rm -rf "$OUT/eval"
echo "wrote $OUT:"; ls -la "$OUT"
