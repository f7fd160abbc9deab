#!/usr/bin/env bash
# table_diadem: the one command; it writes table_diadem.md and table_diadem.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_diadem "$@"
