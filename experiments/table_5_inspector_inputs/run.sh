#!/usr/bin/env bash
# table_5_inspector_inputs: the one command; it writes table_5_inspector_inputs.md and table_5_inspector_inputs.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_5_inspector_inputs "$@"
