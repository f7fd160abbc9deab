#!/usr/bin/env bash
# Table 6's variants as tools, outside the agent loop: the editor probe (neurorefiner probe-editor) on the same
# 20 breaks, 20 noise blobs and 20 pasted fragments per variant, cut into DIADEM dev blocks (OP_1-OP_6, never
# OP_7-OP_9), each edited with the right instruction, a wrong place and the opposite operation. Needs the
# variants' checkpoints (run.sh). Writes probe/<variant>/editor_probe.* and probe_table.md here.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
HERE=experiments/table_6_toporefinenet
probe() {  # variant checkpoint
  .venv/bin/neurorefiner probe-editor --out "$HERE/probe/$1" --n 20 --seed 0 --kinds break,noise,paste \
    --synthetic '' --speed-threads 0 --checkpoint "$2"
}
LANES=${LANES:-2}
i=0
for v in shipped cab adaln cdp hashing scratch_two_stage scratch_one_stage; do
  ckpt=checkpoints/runs/table_6/$v/toporefinenet_stage2.ckpt
  [ "$v" = shipped ] && ckpt=checkpoints/toporefinenet.ckpt
  probe "$v" "$ckpt" > "/tmp/probe_$v.log" 2>&1 &
  i=$((i + 1)); if [ $((i % LANES)) -eq 0 ]; then wait; fi
done
wait
.venv/bin/python "$HERE/probe_table.py"
