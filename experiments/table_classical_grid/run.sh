#!/usr/bin/env bash
# table_classical_grid: the one command; it writes table_classical_grid.md and table_classical_grid.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_classical_grid "$@"
