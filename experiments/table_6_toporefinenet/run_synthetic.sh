#!/usr/bin/env bash
# Table 6 on a SYNTHETIC stand-in (default synthetic_zbfwb): the preset's shards and adapted editor
# (`neurorefiner adapt`, resumable: a finished step is skipped), the six variants of
# conf/experiment/table_6_synthetic/ trained on those shards (checkpoints under
# checkpoints/runs/table_6_synthetic/<preset>/<variant>/, not in git), then the evaluate line, which writes
# table_6_toporefinenet_<preset>.md and .csv here. Extra arguments go to the evaluate line.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 WANDB_MODE=offline HF_HUB_OFFLINE=1
preset=${PRESET:-synthetic_zbfwb}
# the preset's adapt line as its card gives it (the same settings continue the folder; other ones are refused)
case $preset in
  synthetic_cwmbs_noise) adapt_extra=(--baselines segfix,transfiner,segrefiner --baseline-steps 400) ;;
  *) adapt_extra=() ;;
esac
.venv/bin/python -m neurorefiner adapt --dataset "$preset" --out "checkpoints/refiners/$preset" --editor-steps 800 \
  "${adapt_extra[@]}"
for variant in cab adaln cdp hashing scratch_two_stage; do
  .venv/bin/python train.py experiment=table_6_synthetic/$variant dataset="$preset" stage=1
  .venv/bin/python train.py experiment=table_6_synthetic/$variant dataset="$preset" stage=2
done
.venv/bin/python train.py experiment=table_6_synthetic/scratch_one_stage dataset="$preset" stage=2
.venv/bin/python evaluate.py experiment=table_6_toporefinenet_$preset "$@"
