"""experiments/standins/run.sh, step fresh: the shipped stand-in is scored on as many fresh volumes as asked for (the
preset's test split is drawn that large, not silently capped at its default 4), and rows of a replaced checkpoint
or preset never mix with the new ones in the table."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "standins" / "run.sh"


def test_fresh_draws_as_many_volumes_as_it_scores_and_drops_old_rows(tmp_path: Path) -> None:
    log = tmp_path / "calls.txt"
    stub = tmp_path / "py"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    old = tmp_path / "out" / "fresh" / "rows" / "synthetic_zbfwb_unet3d" / "rows" / "old.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PY": str(stub), "NR": str(stub), "OUT": str(tmp_path / "out"),
                               "STEPS": "fresh", "PRESETS": "synthetic_zbfwb", "FRESH_CASES": "8"})
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    evaluate, table = calls
    assert evaluate.startswith("evaluate.py dataset=synthetic_zbfwb dataset.seed=2027 ")
    assert "dataset.n_test=8" in evaluate and "limit=8" in evaluate and "protocols=[root_seeded]" in evaluate
    assert "save_masks=false" in evaluate  # no mask TIFFs written into experiments/
    assert not old.exists()
    out = tmp_path / "out"
    assert table == f"study standins-table --rows {out}/fresh/rows --out {out}/fresh --fresh-seed 2027"
