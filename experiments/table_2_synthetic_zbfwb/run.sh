#!/usr/bin/env bash
# table_2_synthetic_zbfwb: the one command; it writes table_2_synthetic_zbfwb.md and table_2_synthetic_zbfwb.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_2_synthetic_zbfwb "$@"
