#!/usr/bin/env bash
# One device call that trains both shipped GPU checkpoints, within a hard wall budget:
#   1. the 3D U-Net baseline segmenter (scripts/gpu_train_segmenter.sh), ~3 min
#   2. TopoRefineNet stage 1 + stage 2 + its instruction-following evaluation
#      (scripts/gpu_train_toporefinenet.sh), ~5.5 min
# and gathers at most 8 files into $OUT (the device tool's limit): the checkpoints, their provenance
# cards and one logs.tar.gz. Prepare once on the CPU machine:
#   bash scripts/gpu_train_toporefinenet.sh --prepare     (fills .gpu_deps/ and the text-embedding cache)
# Device call: command `bash scripts/gpu_run_all.sh`, carry [".gpu_deps",
#   "data/cache/text_embeddings", "data/cache/init_masks_dev"], timeout_s 570.
# CPU smoke test: SMOKE=1 OUT=/tmp/gpu_all PY=.venv/bin/python bash scripts/gpu_run_all.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:?set OUT}
PY=${PY:-python3}
SEG_OUT=/tmp/nr_seg; TOPO_OUT=/tmp/nr_topo
rm -rf "$SEG_OUT" "$TOPO_OUT"; mkdir -p "$SEG_OUT" "$TOPO_OUT" "$OUT"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline HF_HUB_OFFLINE=1 PROJECT_ROOT=$ROOT
if [[ -d .gpu_deps/site ]] && ! $PY -c "import cc3d, edt, dijkstra3d" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu_site \
    .gpu_deps/whl/*.whl || true
fi
export PYTHONPATH=$ROOT:$ROOT/.gpu_deps/site:/tmp/gpu_site:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null  || true

if [[ -n "${SMOKE:-}" ]]; then
  SEG_ENV=(TRAINER=cpu EPOCHS=1 SPE=4 "PATCH=[16,32,32]" "FEATURES=[4,8,16]" "VAL_MAX=[16,64,64]" WORKERS=0)
  TOPO_ENV=(ACCEL=cpu PRECISION=32 STEPS1=2 STEPS2=2 BATCH=2 "CROP=[16,32,32]" WORKERS=0 EVAL_N=4)
  SEG_LIMIT=600; TOPO_LIMIT=900
else
  SEG_ENV=(MAX_TIME=00:00:02:00)
  TOPO_ENV=(TIME1=00:00:03:00 TIME2=00:00:01:00 STEPS1=5000 STEPS2=1500)
  SEG_LIMIT=200; TOPO_LIMIT=330
fi
T0=$(date +%s)
env "${SEG_ENV[@]}" OUT=$SEG_OUT PY=$PY timeout $SEG_LIMIT bash scripts/gpu_train_segmenter.sh > "$SEG_OUT/seg_stdout.log" 2>&1
echo "segmenter: exit $? after $(( $(date +%s) - T0 )) s"
T1=$(date +%s)
env "${TOPO_ENV[@]}" OUT=$TOPO_OUT PY=$PY timeout $TOPO_LIMIT bash scripts/gpu_train_toporefinenet.sh > "$TOPO_OUT/topo_stdout.log" 2>&1
echo "toporefinenet: exit $? after $(( $(date +%s) - T1 )) s"
for f in "$SEG_OUT"/unet3d_diadem_gpu.pt "$SEG_OUT"/unet3d_diadem_gpu.md "$TOPO_OUT"/toporefinenet_stage1.ckpt \
         "$TOPO_OUT"/toporefinenet_stage2.ckpt "$TOPO_OUT"/toporefinenet_gpu.md; do
  [[ -f $f ]] && cp "$f" "$OUT/"
done
tar czf "$OUT/logs.tar.gz" -C /tmp nr_seg nr_topo --exclude='*.pt' --exclude='*.ckpt' 2>/dev/null
tail -n 5 "$SEG_OUT/seg_stdout.log" "$TOPO_OUT/topo_stdout.log"
ls -la "$OUT"
