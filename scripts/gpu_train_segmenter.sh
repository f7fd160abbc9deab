#!/usr/bin/env bash
# Train the 3D U-Net baseline on DIADEM dev (OP_1-OP_5 train, OP_6 validation; OP_7-OP_9 never touched)
# on one GPU within a hard wall budget, and write the checkpoint + its provenance .md into $OUT.
#
#   OUT=/some/dir bash scripts/gpu_train_segmenter.sh            # GPU defaults: < 4 min wall
#   TRAINER=cpu EPOCHS=1 SPE=4 PATCH=[16,32,32] FEATURES=[4,8,16] VAL_MAX=[16,64,64] WORKERS=0 \
#     OUT=/tmp/x bash scripts/gpu_train_segmenter.sh              # CPU smoke test of the script
#
# Every knob is an environment variable; the defaults are the GPU run. max_time stops training before
# the budget in any case (the checkpoint picked on validation Dice is exported either way).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the folder that receives the checkpoint}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
TRAINER=${TRAINER:-gpu}
EPOCHS=${EPOCHS:-30}            # x SPE/BATCH steps
SPE=${SPE:-256}                 # crops per epoch
BATCH=${BATCH:-8}
PATCH=${PATCH:-[32,128,128]}
FEATURES=${FEATURES:-[16,32,64,128]}   # ~1.4 M parameters, ~6 MB: still under the 20 MB shipping limit
VAL_EVERY=${VAL_EVERY:-3}
VAL_MAX=${VAL_MAX:-null}        # whole OP_6 on a GPU
WORKERS=${WORKERS:-6}
MAX_TIME=${MAX_TIME:-00:00:02:40}   # DD:HH:MM:SS for training itself (start-up and export come on top)
NAME=${NAME:-unet3d_diadem_gpu}
RUN=${RUN:-$OUT/run}
mkdir -p "$OUT" "$RUN"
export WANDB_MODE=offline PROJECT_ROOT="$PWD"

CMD=( "$PY" train.py task=segment model=unet3d dataset=diadem "trainer=$TRAINER" logger=csv seed=0
  "trainer.max_epochs=$EPOCHS" "++trainer.max_time=$MAX_TIME" "trainer.check_val_every_n_epoch=$VAL_EVERY"
  trainer.enable_progress_bar=false trainer.log_every_n_steps=10
  "model.features=$FEATURES"
  "segmentation.data.patch_size=$PATCH" "segmentation.data.batch_size=$BATCH"
  "segmentation.data.samples_per_epoch=$SPE" "segmentation.data.num_workers=$WORKERS"
  "segmentation.data.val_max_size=$VAL_MAX"
  "segmentation.ckpt_dir=$RUN/ckpt" "segmentation.export_path=$OUT/$NAME.pt"
  "hydra.run.dir=$RUN/hydra" )
start=$(date +%s)
"${CMD[@]}" 2>&1 | tee "$OUT/train.log"
end=$(date +%s)
echo "wall ${end}-${start} = $((end - start)) s" | tee -a "$OUT/train.log"
"$PY" - "$OUT/$NAME.pt" "$OUT/$NAME.md" "$((end - start))" "${CMD[*]}" <<'PYEOF'
import sys
from pathlib import Path
from neurorefiner.training.segmenter import provenance_markdown
pt, md, wall, cmd = sys.argv[1:5]
text = provenance_markdown(pt, "OUT=<dir> bash scripts/gpu_train_segmenter.sh\n# which ran:\n" + cmd,
                           title=Path(pt).stem + " (3D U-Net, DIADEM dev)")
text += f"\nWhole script wall time (start-up, data loading, training, export): {wall} s.\n"
Path(md).write_text(text)
print(text)
PYEOF
rm -rf "$RUN/ckpt"   # Lightning checkpoints hold optimiser state: keep only the compact export
