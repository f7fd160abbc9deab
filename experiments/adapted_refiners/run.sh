#!/usr/bin/env bash
# The refiners adapted to the SYNTHETIC stand-ins (never the published benchmarks): one `neurorefiner adapt` line
# each (train split only; the learned baselines trained on the same data for Tables 1-2), then each adapted
# editor against the shipped one on its preset's own defects (volumes rendered afresh, never a test volume).
set -euo pipefail
cd "$(dirname "$0")/../.."
for preset in synthetic_bigneuron synthetic_cwmbs_noise; do
  # the steps this CPU afforded (the defaults are 1,500 editor and 800 baseline steps; README.md here)
  neurorefiner adapt --dataset "$preset" --out "checkpoints/refiners/$preset" --baselines segfix,transfiner,segrefiner \
    --editor-steps 800 --baseline-steps 400
  for editor in shipped adapted; do
    ckpt=checkpoints/toporefinenet.ckpt
    [ "$editor" = adapted ] && ckpt="checkpoints/refiners/$preset/editor.ckpt"
    neurorefiner study probe-editor --out "experiments/adapted_refiners/probe/$preset/$editor" --stacks '' \
      --synthetic "$preset" --synthetic-n 3 --kinds break,noise,paste --checkpoint "$ckpt" --speed-threads 0
  done
done
# zbfwb: the editor alone is adapted (its preset keeps its own judge, trained on the root's piece at 16 um:
# conf/refiner/synthetic_zbfwb.yaml), no baselines; its shards are Table 6's data on zbfwb
# (experiments/table_6_toporefinenet/run_synthetic.sh)
neurorefiner adapt --dataset synthetic_zbfwb --out checkpoints/refiners/synthetic_zbfwb --editor-steps 800
