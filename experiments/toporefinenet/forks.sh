# Sourced by budget_probe.sh and fusion_probe.sh: the environment of a one-core fork and `fork NAME OVERRIDES...`,
# which trains NAME for 1,500 steps from the budget run's weights at 9,993 steps (constant lr 5e-4, fresh AdamW,
# the run's residual loss) into $OUT/NAME unless its checkpoint is already there.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
START=checkpoints/resume/toporefinenet_stage1_budget/weights_9993.ckpt
fork() {  # name, overrides...
  local name=$1; shift
  [[ -f $OUT/$name/toporefinenet_stage1.ckpt ]] && return 0
  $PY train.py experiment=toporefinenet_probe "stages.1.init_from=$PWD/$START" stages.1.max_steps=1500 \
    stages.1.datamodule.samples_per_epoch=3000 model.residual=true +model.cosine=false \
    "paths.checkpoint_dir=$PWD/$OUT/$name" "$@" > "$OUT.$name.log" 2>&1
}
