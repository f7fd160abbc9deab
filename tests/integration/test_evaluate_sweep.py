"""`python evaluate.py -m ...` end to end (basic launcher, tiny dataset): one merged table of the whole sweep in
the sweep dir, each row labelled by its job's differing override, a failed job listed as missing."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sweep(tmp_path: Path, gaps: str) -> tuple[subprocess.CompletedProcess, Path]:
    sweep_dir = tmp_path / "sweep"
    env = {**os.environ, "NEUROREFINER_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), "-m", "dataset=tiny", "split=test", "limit=1", "segmenter=otsu",
         f"dataset.root={tmp_path / 'synth'}", "dataset.n_train=0", "dataset.n_val=0", "dataset.n_test=1",
         "protocols=[root_seeded]", "progress=false", "methods=[classical]",
         f"method_registry.classical.max_gap={gaps}", f"hydra.sweep.dir={sweep_dir}"],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    return run, sweep_dir


def test_multirun_writes_one_table_of_every_job(tmp_path: Path) -> None:
    run, sweep_dir = _sweep(tmp_path, "5,10")
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"merged table of the whole sweep: {sweep_dir / 'sweep_table.md'}" in run.stdout
    md = (sweep_dir / "sweep_table.md").read_text()
    assert "2 job(s), 2 with results, 0 missing" in md
    for gap in (5, 10):
        assert f"| classical (root_seeded) · method_registry.classical.max_gap={gap} | 1 |" in md
    summary = list(csv.DictReader(open(sweep_dir / "sweep_table.csv")))
    assert [r["overrides"] for r in summary] == ["method_registry.classical.max_gap=5",
                                                 "method_registry.classical.max_gap=10"]
    assert len({r["method_key"] for r in summary}) == 2  # two settings, two rows
    per_volume = list(csv.DictReader(open(sweep_dir / "sweep_per_volume.csv")))
    assert [r["job"] for r in per_volume] == ["0", "1"]
    # every job still wrote its own table in its own output dir
    assert sorted(p.parent.name for p in sweep_dir.glob("*/table.md")) == ["0_tiny", "1_tiny"]


def test_a_failed_job_is_a_missing_row(tmp_path: Path) -> None:
    run, sweep_dir = _sweep(tmp_path, "5,oops")  # max_gap=oops: the job raises inside the method
    assert run.returncode != 0  # Hydra still fails the sweep
    md = (sweep_dir / "sweep_table.md").read_text()
    assert "| classical (root_seeded) · method_registry.classical.max_gap=5 | 1 |" in md
    assert "| MISSING (failed) · method_registry.classical.max_gap=oops | 0 |" in md
    assert "job 1 (`method_registry.classical.max_gap=oops`): failed: TypeError" in md
