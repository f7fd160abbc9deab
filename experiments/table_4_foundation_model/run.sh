#!/usr/bin/env bash
# table_4_foundation_model: the one command; it writes table_4_foundation_model.md and table_4_foundation_model.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_4_foundation_model "$@"
