#!/usr/bin/env bash
# The realism report of README.md: every synthetic preset (seeds 0-2) against DIADEM OP_1-OP_6 (about 4 minutes
# on 2 cores); writes results/.
set -euo pipefail
cd "$(dirname "$0")/../.."
NR=${NR:-.venv/bin/neurorefiner}
$NR study realism --n 3 --out experiments/synthetic_realism/results
