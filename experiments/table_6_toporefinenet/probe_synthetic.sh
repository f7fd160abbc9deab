#!/usr/bin/env bash
# Table 6 on a SYNTHETIC stand-in (default synthetic_zbfwb), its variants as tools outside the agent loop: the
# editor probe on the same 20 breaks, 20 noise blobs and 20 pasted fragments per checkpoint, cut into 3 stacks of
# the preset rendered afresh (never a test volume), each edited with the right instruction, a wrong place and the
# opposite operation. Needs run_synthetic.sh's checkpoints. Writes probe_<preset>/<variant>/editor_probe.* and
# probe_<preset>.md here. VARIANTS="cab adaln" probes a subset (VARIANTS="" none: the table alone); NO_COMPARE=1 skips the table.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
preset=${PRESET:-synthetic_zbfwb}
HERE=experiments/table_6_toporefinenet
OUT=$HERE/probe_$preset
runs=checkpoints/runs/table_6_synthetic/$preset
for v in ${VARIANTS-shipped adapted cab adaln cdp hashing scratch_two_stage scratch_one_stage}; do
  case $v in
    shipped) ckpt=checkpoints/toporefinenet.ckpt ;;
    adapted) ckpt=checkpoints/refiners/$preset/editor.ckpt ;;
    *) ckpt=$runs/$v/toporefinenet_stage2.ckpt ;;
  esac
  .venv/bin/python -m neurorefiner study probe-editor --out "$OUT/$v" --n 20 --seed 0 --kinds break,noise,paste \
    --stacks '' --synthetic "$preset" --synthetic-n 3 --speed-threads 0 --checkpoint "$ckpt"
done
[ -n "${NO_COMPARE:-}" ] && exit 0
rows=()  # the table holds every checkpoint probed so far (a missing one is named, not faked)
for pair in "shipped editor (DIADEM only)=shipped" "adapted editor (neurorefiner adapt)=adapted" "CAB=cab" "AdaLN=adaln" \
    "CDP=cdp" "CAB + hashing encoder=hashing" "CAB two-stage from scratch=scratch_two_stage" \
    "CAB one-stage from scratch=scratch_one_stage"; do
  dir=$OUT/${pair##*=}
  if [ -f "$dir/editor_probe.csv" ]; then rows+=("${pair%=*}=$dir"); else echo "not probed yet: $dir" >&2; fi
done
.venv/bin/python -m neurorefiner study probe-compare --out "$OUT.md" \
  --title "Table 6 variants as tools: the editor probe ($preset, SYNTHETIC stand-in)" \
  --intro "Made by \`PRESET=$preset bash experiments/table_6_toporefinenet/probe_synthetic.sh\` (per checkpoint \`neurorefiner study probe-editor --n 20 --kinds break,noise,paste --stacks '' --synthetic $preset --synthetic-n 3\`): 20 breaks, 20 noise blobs and 20 pasted fragments cut into the gold of 3 SYNTHETIC $preset stacks rendered afresh (never a test volume), the same for every checkpoint, each edited with the right instruction, a wrong place and the opposite operation. Shares of edits; raw = the network's own output on the block, decoded = with the topology decoding the agents use." \
  "${rows[@]}"
