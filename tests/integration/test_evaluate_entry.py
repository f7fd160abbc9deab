"""`python evaluate.py` end to end: masks -> APP2 -> metrics -> per-volume CSV and the paper-style table."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_evaluate_gold_masks_score_perfectly(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=diadem", "split=dev",
                          "methods=[gold_mask]", "limit=1", "protocols=[full_volume]", f"out_dir={out}",
                          f"hydra.run.dir={tmp_path / 'h'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "per_volume.csv")))
    assert [r["case"] for r in rows] == ["OP_1"]
    assert float(rows[0]["F1"]) > 0.99 and float(rows[0]["SD"]) < 1.5
    table = (out / "table.md").read_text()
    assert "real data" in table and "| gold_mask (full_volume) | 1 |" in table


def test_evaluate_absent_dataset_is_one_clear_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=zbfwb",
                          f"dataset.root={tmp_path / 'nothing'}", f"hydra.run.dir={tmp_path / 'h'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert "zbfwb dataset is not here" in run.stderr and "Traceback" not in run.stderr
