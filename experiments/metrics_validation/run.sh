#!/usr/bin/env bash
# The four validation tables of README.md (about 2 minutes on 2 cores); one table: ONLY=gold bash run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
only=()
for t in ${ONLY:-}; do only+=(--only "$t"); done
$NR study metrics-validation --out experiments/metrics_validation "${only[@]}"
