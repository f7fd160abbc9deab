#!/usr/bin/env bash
# The device-tool run of the 3D U-Net baseline on DIADEM dev: the recipe is experiment=paper_scale_unet3d_diadem
# (conf/experiment/; on a GPU machine of your own just run `python train.py experiment=paper_scale_unet3d_diadem`,
# and see docs/training_at_scale.md for DDP and Slurm). What only this script says: a hard wall budget
# (MAX_TIME), where the files go ($OUT), and the provenance .md written beside the export.
#
#   OUT=/some/dir bash scripts/gpu_train_segmenter.sh            # GPU: < 4 min wall
#   TRAINER=cpu EPOCHS=1 SPE=4 PATCH=[16,32,32] FEATURES=[4,8,16] VAL_MAX=[16,64,64] WORKERS=0 \
#     OUT=/tmp/x bash scripts/gpu_train_segmenter.sh              # CPU smoke test of the script
#
# The smoke knobs (EPOCHS, SPE, BATCH, PATCH, FEATURES, VAL_EVERY, VAL_MAX, WORKERS) override the experiment
# only when set. max_time stops training before the budget in any case (the checkpoint picked on validation
# Dice is exported either way).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the folder that receives the checkpoint}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
TRAINER=${TRAINER:-gpu}
MAX_TIME=${MAX_TIME:-00:00:02:40}   # DD:HH:MM:SS for training itself (start-up and export come on top)
NAME=${NAME:-unet3d_diadem_gpu}
RUN=${RUN:-$OUT/run}
mkdir -p "$OUT" "$RUN"
export WANDB_MODE=offline PROJECT_ROOT="$PWD"

KNOBS=()
[[ -n "${EPOCHS:-}" ]] && KNOBS+=("trainer.max_epochs=$EPOCHS")
[[ -n "${VAL_EVERY:-}" ]] && KNOBS+=("trainer.check_val_every_n_epoch=$VAL_EVERY")
[[ -n "${FEATURES:-}" ]] && KNOBS+=("model.features=$FEATURES")
[[ -n "${PATCH:-}" ]] && KNOBS+=("segmentation.data.patch_size=$PATCH")
[[ -n "${BATCH:-}" ]] && KNOBS+=("segmentation.data.batch_size=$BATCH")
[[ -n "${SPE:-}" ]] && KNOBS+=("segmentation.data.samples_per_epoch=$SPE")
[[ -n "${WORKERS:-}" ]] && KNOBS+=("segmentation.data.num_workers=$WORKERS")
[[ -n "${VAL_MAX:-}" ]] && KNOBS+=("segmentation.data.val_max_size=$VAL_MAX")
CMD=( "$PY" train.py experiment=paper_scale_unet3d_diadem "trainer=$TRAINER" "++trainer.max_time=$MAX_TIME"
  "segmentation.ckpt_dir=$RUN/ckpt" "segmentation.export_path=$OUT/$NAME.pt" "hydra.run.dir=$RUN/hydra"
  ${KNOBS[@]+"${KNOBS[@]}"} )
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
