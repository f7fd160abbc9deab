#!/usr/bin/env bash
# table_3_agents: the one command; it writes table_3_agents.md and table_3_agents.csv here (rows cached in outputs/tables/).
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python evaluate.py experiment=table_3_agents "$@"
