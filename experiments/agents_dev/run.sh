#!/usr/bin/env bash
# agents_dev: the one command; it writes agents_dev.md and agents_dev.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=agents_dev "$@"
