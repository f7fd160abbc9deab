#!/usr/bin/env bash
# One device call for Table 6 and the shipped editor: the sample shards of both stages made once on every core,
# then every TopoRefineNet variant trained side by side on the one GPU, each for the same wall budget (one
# scripts/gpu_train_toporefinenet.sh per variant, all reading the same shards), packed into the device tool's
# 8 files. A small network leaves a large GPU mostly idle, so several runs at once cost no more device time
# than one; what they share is the CPU cores that feed them (WORKERS each).
#
# Variants (VARIANTS, space-separated names; each is the full model but for one thing):
#   cab        the full model: CAB fusion, MiniLM-L6 text, stage 1 then stage 2, the probes' loss (residual)
#   mask_loss  the same with the loss on the mask instead of the change (the loss probe's other arm, at scale)
#   adaln cdp  the other fusions                    hashing    a bag-of-words hashing text encoder
#   one_stage  no stage 1: the mined samples alone, for the same total wall time
# Writes into $OUT (at most 8 files): cab_stage1.ckpt, cab_stage2.ckpt (the candidate shipped editor),
#   variants.tar.gz (every other variant's final checkpoint with its .json and card), logs.tar.gz (each
#   run's train.log, metrics CSVs and instruction-following rows), variants.md (steps, wall, validation and
#   instruction-following summary of every run).
# Prepare once on the CPU machine: bash scripts/gpu_train_toporefinenet.sh --prepare
# Device call: command `bash scripts/gpu_train_editor_variants.sh`, carry [".gpu_deps",
#   "data/cache/text_embeddings", "data/cache/init_masks_dev"], timeout_s 570.
# CPU smoke test: SMOKE=1 OUT=/tmp/gpu_variants PY=.venv/bin/python bash scripts/gpu_train_editor_variants.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:?set OUT}
PY=${PY:-python3}
VARIANTS=${VARIANTS:-cab mask_loss adaln cdp hashing one_stage}
T_START=$(date +%s)
WORK=${WORK:-/tmp/nr_variants}; SHARDS=$WORK/shards
rm -rf "$WORK"; mkdir -p "$WORK" "$OUT"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PROJECT_ROOT=$ROOT
if [[ -d .gpu_deps/site ]] && ! $PY -c "import cc3d, dijkstra3d, edt" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu_site .gpu_deps/whl/*.whl || true
fi
export PYTHONPATH=$ROOT:$ROOT/.gpu_deps/site:/tmp/gpu_site:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true

if [[ -n "${SMOKE:-}" ]]; then  # the same path at a tiny size, on the CPU
  DATASET=${DATASET:-tiny}; SEGMENTERS=${SEGMENTERS:-otsu}
  COMMON_ENV=(ACCEL=cpu PRECISION=${PRECISION:-32} STEPS1=2 STEPS2=2 BATCH=2 "CROP=[16,32,32]" WORKERS=0 EVAL_N=4
              TIME1=00:00:05:00 TIME2=00:00:05:00)
  N1=${N1:-8}; N2=${N2:-8}; NVAL=${NVAL:-4}; CROP_CSV=16,32,32; RUN_LIMIT=${RUN_LIMIT:-900}
else
  COMMON_ENV=(BATCH=${BATCH:-16} "CROP=[32,64,64]" WORKERS=${WORKERS:-2} EVAL_N=${EVAL_N:-64}
              STEPS1=${STEPS1:-20000} STEPS2=${STEPS2:-8000})
  N1=${N1:-4096}; N2=${N2:-1024}; NVAL=${NVAL:-256}; CROP_CSV=32,64,64
fi
# an epoch long enough that validation (Betti counts on the CPU) and last.ckpt come seldom
COMMON_EXTRA="stages.1.datamodule.samples_per_epoch=16384 stages.2.datamodule.samples_per_epoch=8192"
DEADLINE=${DEADLINE:-545}   # seconds from the start to the packed $OUT (the device call's timeout_s is 600)
DATASET=${DATASET:-diadem}; SEGMENTERS=${SEGMENTERS:-unet3d nnunet_style}
INIT_MASKS=${INIT_MASKS:-$ROOT/data/cache/init_masks_dev}
NR=($PY -c "from neurorefiner.cli.main import app; app()")
T0=$(date +%s)

# -- the segmenters' masks of the training split where not carried, then the shards, once for every run (crops:
#    the editor's crop at refine time, loop.editor_size)
SPLIT=dev; [[ "$DATASET" != diadem ]] && SPLIT=train
MASK_DEV=cpu; [[ -z "${SMOKE:-}" ]] && MASK_DEV=cuda
SEG_ARGS=()
for S in $SEGMENTERS; do
  SEG_ARGS+=(--segmenter "$S")
  if ! compgen -G "$INIT_MASKS/$DATASET/$S/*.tif" >/dev/null; then
    for SP in $SPLIT $([[ "$SPLIT" == train ]] && echo val); do
      "${NR[@]}" init-masks --dataset "$DATASET" --split "$SP" --segmenter "$S" --device $MASK_DEV \
        --out "$INIT_MASKS/$DATASET/$S" 2>&1 | tail -n 1
    done
  fi
done
shards() {  # stage, part, n, seed
  "${NR[@]}" make-shards --stage "$1" --part "$2" --n "$3" --seed "$4" --dataset "$DATASET" --crop "$CROP_CSV" \
    --workers "$(nproc)" --shard-size 128 --out "$SHARDS/stage$1/$2" --init-masks-root "$INIT_MASKS" \
    "${SEG_ARGS[@]}" 2>&1 | tail -n 1
}
shards 1 train "$N1" 0; shards 1 val "$NVAL" 1
shards 2 train "$N2" 0; shards 2 val "$NVAL" 1
T1=$(date +%s)
echo "shards: $((T1 - T0)) s"
if [[ -z "${SMOKE:-}" ]]; then  # what is left of the deadline: ~130 s of start-ups, validation, evaluation, card
  RUN_LIMIT=$(( DEADLINE - (T1 - T_START) - 40 ))
  TRAIN=$(( RUN_LIMIT - 130 )); (( TRAIN < 90 )) && TRAIN=90
  hms() { printf '00:00:%02d:%02d' $(( $1 / 60 )) $(( $1 % 60 )); }
  COMMON_ENV+=("TIME1=$(hms $(( TRAIN * 7 / 10 )))" "TIME2=$(hms $(( TRAIN * 3 / 10 )))")
  echo "per run: limit $RUN_LIMIT s, training $TRAIN s (70 % stage 1, 30 % stage 2)"
fi

# -- every variant at once, same budget
declare -A EXTRA=([cab]="" [mask_loss]="" [adaln]="model.net.fusion=adaln" [cdp]="model.net.fusion=cdp"
                  [hashing]="text_encoder=hashing" [one_stage]="")
RESIDUAL="model.residual=true model.edit_weight=10.0 model.swap_instruction_prob=0.0"
MASKLOSS="model.residual=false model.edit_weight=10.0 model.swap_instruction_prob=0.0"
pids=()
for V in $VARIANTS; do
  [[ -v "EXTRA[$V]" ]] || { echo "unknown variant $V (known: ${!EXTRA[*]})"; exit 2; }
  LOSS=$RESIDUAL; [[ $V == mask_loss ]] && LOSS=$MASKLOSS
  ONE=0; [[ $V == one_stage ]] && ONE=1
  mkdir -p "$WORK/$V"
  env "${COMMON_ENV[@]}" OUT="$WORK/$V/out" LOG_ROOT="$WORK/$V/logs" SHARDS="$SHARDS" SHARDS_READY=1 \
    INIT_MASKS="$INIT_MASKS" DATASET="$DATASET" SEGMENTERS="$SEGMENTERS" N1="$N1" N2="$N2" ONE_STAGE=$ONE \
    LOSS="$LOSS" ARCH="" EXTRA="$COMMON_EXTRA ${EXTRA[$V]}" PY="$PY" \
    timeout "$RUN_LIMIT" bash scripts/gpu_train_toporefinenet.sh > "$WORK/$V/stdout.log" 2>&1 &
  pids+=($!)
  sleep 2
done
for i in "${!pids[@]}"; do wait "${pids[$i]}"; echo "run $i: exit $?"; done
T2=$(date +%s)
echo "training: $((T2 - T1)) s"

# -- pack: at most 8 files back
[[ -f $WORK/cab/out/toporefinenet_stage1.ckpt ]] && cp "$WORK/cab/out/toporefinenet_stage1.ckpt" "$OUT/cab_stage1.ckpt"
[[ -f $WORK/cab/out/toporefinenet_stage2.ckpt ]] && cp "$WORK/cab/out/toporefinenet_stage2.ckpt" "$OUT/cab_stage2.ckpt"
mkdir -p "$WORK/pack/variants" "$WORK/pack/logs"
for V in $VARIANTS; do
  mkdir -p "$WORK/pack/variants/$V" "$WORK/pack/logs/$V"
  cp "$WORK/$V"/out/*.json "$WORK/$V"/out/*.md "$WORK/pack/variants/$V/" 2>/dev/null
  for c in "$WORK/$V"/out/cards/*.md; do [[ -f $c ]] && cp "$c" "$WORK/pack/variants/$V/card_$(basename "$c")"; done
  [[ $V != cab ]] && cp "$WORK/$V"/out/toporefinenet_stage2.ckpt "$WORK/pack/variants/$V/" 2>/dev/null
  cp "$WORK/$V"/stdout.log "$WORK/$V"/out/train.log "$WORK/$V"/out/logs.tar.gz "$WORK/pack/logs/$V/" 2>/dev/null
done
tar czf "$OUT/variants.tar.gz" -C "$WORK/pack" variants
tar czf "$OUT/logs.tar.gz" -C "$WORK/pack" logs
{
  echo "# TopoRefineNet variants trained side by side on $( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || echo cpu) | head -1)"
  echo
  echo "Written by \`scripts/gpu_train_editor_variants.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ); shards $((T1 - T0)) s"
  echo "($N1 / $N2 / $NVAL stage-1 / stage-2 / validation samples, $DATASET, crops $CROP_CSV), training $((T2 - T1)) s."
  echo "Settings: ${COMMON_ENV[*]}"
  for V in $VARIANTS; do
    echo; echo "## $V"; echo
    echo "overrides: ${EXTRA[$V]:-none}$([[ $V == mask_loss ]] && echo " (loss: $MASKLOSS)")$([[ $V == one_stage ]] && echo " (ONE_STAGE=1)")"
    for s in 1 2; do
      j=$WORK/$V/out/toporefinenet_stage$s.json
      [[ -f $j ]] && { echo; echo "stage $s: \`$(tr -d '\n ' < "$j" | cut -c1-600)\`"; }
    done
    g=$WORK/$V/out/toporefinenet_gpu.md
    [[ -f $g ]] && { echo; sed -n '/^## Instruction following/,$p' "$g"; }
    tail -n 3 "$WORK/$V/stdout.log" | sed 's/^/    /'
  done
} > "$OUT/variants.md"
ls -la "$OUT"
