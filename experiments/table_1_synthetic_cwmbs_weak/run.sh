#!/usr/bin/env bash
# table_1_synthetic_cwmbs_weak: the one command; it writes table_1_synthetic_cwmbs_weak.md and table_1_synthetic_cwmbs_weak.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_1_synthetic_cwmbs_weak "$@"
