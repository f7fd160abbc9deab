#!/usr/bin/env bash
# The budget probe's summary table (results/budget_probe/summary.md) from the <name>.json files the probe left
# there, one labelled row per checkpoint and threshold; budget_probe.sh ends with it, and it runs alone after the
# probe line scored only some checkpoints (their other jsons stay). NOW_LABELS: one name="label" a line, for the
# run's latest checkpoints (BUDGET*=, named by budget_probe.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
RESULTS=${RESULTS:-experiments/toporefinenet/results/budget_probe}
NOW=()
while IFS= read -r line; do [[ -n $line ]] && NOW+=("$line"); done <<< "${NOW_LABELS:-}"
$NR study probe-table "$RESULTS" \
  shipped_stage1="shipped stage 1 (start of the budget run)" shipped_two_stage="shipped editor (two-stage, the default)" \
  budget_9993="budget run, 9,993 steps (3.0 CPU-h spent)" \
  control="+1,500 steps, same loss" negative="+1,500 steps, negative_weight 10 + batch Dice" \
  faint="+1,500 steps, same loss, half the breaks faint across the gap" \
  faint_negative="+1,500 steps, faint breaks and priced unasked changes" \
  film="+1,500 steps, same loss, instruction at every decoder level (text_film)" \
  faint_film="+1,500 steps, faint breaks, instruction at every decoder level (text_film)" \
  faint_film_paired="+1,500 steps, as faint_film, negatives drawn per read, one-place opposites" \
  faint_film_gate="+1,500 steps, as faint_film, with the edit gate (edit_gate)" \
  faint_film_gate_3000="the edit-gate fork, 1,500 steps more (3,000 in all)" \
  gate_3677="phase 4 (edit gate) from phase 3's end, 3,677 steps (weights_3677.ckpt)" \
  budget_stage2="stage 2 from gate_3677, 1,500 steps: checkpoints/toporefinenet_budget.ckpt" \
  budget_stage2_9555="stage 2 from phase 4 at 9,555 steps (weights_9555.ckpt), 1,500 steps" "${NOW[@]}"
