#!/usr/bin/env bash
# figure_5_iterations: the one command; it writes figure_5_iterations.md and figure_5_iterations.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=figure_5_iterations "$@"
