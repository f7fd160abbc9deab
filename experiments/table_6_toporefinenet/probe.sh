#!/usr/bin/env bash
# Table 6's variants as tools, outside the agent loop: the editor probe (neurorefiner study probe-editor) on the same
# 20 breaks, 20 noise blobs and 20 pasted fragments per variant, cut into DIADEM dev blocks (OP_1-OP_6, never
# OP_7-OP_9), each edited with the right instruction, a wrong place and the opposite operation. Needs the
# variants' checkpoints (run.sh). Writes probe/<variant>/editor_probe.* and probe_table.md here (neurorefiner study probe-compare).
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
HERE=experiments/table_6_toporefinenet
probe() {  # variant checkpoint
  .venv/bin/neurorefiner study probe-editor --out "$HERE/probe/$1" --n 20 --seed 0 --kinds break,noise,paste \
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
.venv/bin/neurorefiner study probe-compare --out "$HERE/probe_table.md" \
  --title "Table 6 variants as tools: the editor probe (DIADEM dev blocks, real data)" \
  --intro "Made by \`bash experiments/table_6_toporefinenet/probe.sh\` (per variant \`neurorefiner study probe-editor --n 20 --kinds break,noise,paste --synthetic ''\`): 20 breaks, 20 noise blobs and 20 pasted fragments cut into gold blocks of DIADEM OP_1-OP_6, the same for every variant, each edited with the right instruction, a wrong place and the opposite operation. Shares of edits; raw = the network's own output on the block, decoded = with the topology decoding the agents use." \
  "shipped editor (reference, longer chain)=$HERE/probe/shipped" "CAB=$HERE/probe/cab" "AdaLN=$HERE/probe/adaln" \
  "CDP=$HERE/probe/cdp" "CAB + hashing encoder=$HERE/probe/hashing" \
  "CAB two-stage from scratch=$HERE/probe/scratch_two_stage" "CAB one-stage from scratch=$HERE/probe/scratch_one_stage"
