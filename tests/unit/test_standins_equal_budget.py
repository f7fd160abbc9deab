"""experiments/segmenters/run_standins_equal_budget.sh: every network gets the stand-in U-Net's recipe with only
the network and the steps changed, its threshold is chosen as the stand-ins' is, its rows are scored root-seeded
(the SYNTHETIC tables' protocol) and carry the budget in their name."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "segmenters" / "run_standins_equal_budget.sh"


def _run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = tmp_path / "calls.txt"
    stub = tmp_path / "py"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PY": str(stub), "NR": str(stub), "OUT": str(tmp_path / "out"), **env})
    return done, log.read_text().splitlines() if log.exists() else []


def test_the_recipe_is_the_standin_unets_with_the_network_and_steps_swapped(tmp_path):
    done, calls = _run(tmp_path, ARCHS="vnet", PRESETS="synthetic_cwmbs_noise", EPOCHS="2")
    assert done.returncode == 0, done.stderr
    train, choose, rows = calls[0], calls[1], calls[2]
    assert train.startswith("train.py experiment=unet3d_synthetic_cwmbs_noise_cpu model=vnet trainer.max_epochs=2 ")
    assert (ROOT / "conf" / "experiment" / "unet3d_synthetic_cwmbs_noise_cpu.yaml").exists()
    assert "segmentation.export_path=checkpoints/runs/segment/vnet_600steps/synthetic_cwmbs_noise/segmenter.pt" in train
    standins = (ROOT / "experiments" / "standins" / "run.sh").read_text()
    grid = re.search(r"(--threshold 0\.2 .*?--protocol root_seeded)", standins, re.S).group(1).replace("\\", "")
    assert " ".join(grid.split()) in choose           # the stand-ins' own val grid and protocol
    assert "--segmenter vnet:600steps=checkpoints/runs/segment/vnet_600steps/" in rows
    assert "--protocol root_seeded" in rows and "--no-naive" in rows
    assert calls[-1] == f"study equal-budget-table --folder {tmp_path / 'out'} --preset synthetic_cwmbs_noise"


def test_bad_settings_are_refused_before_any_work(tmp_path):
    done, calls = _run(tmp_path, EPOCHS="0")
    assert done.returncode == 2 and "EPOCHS=0" in done.stderr and not calls
    done, calls = _run(tmp_path, STEPS="train evaluate")
    assert done.returncode == 2 and "unknown step evaluate" in done.stderr and not calls


def _write_run(folder: Path, arch: str, f1s: list[float], ssd: list[float], wall: int, val_f1: float) -> None:
    from neurorefiner.evaluation.segmenter_rows import read_rows, write_tables

    method = f"{arch}:300steps (threshold 0.3, dust 0, keep largest all) -> APP2 from the gold root"
    old = read_rows(folder / "synthetic_cwmbs_weak_test_cases.csv") if (
        folder / "synthetic_cwmbs_weak_test_cases.csv").exists() else []
    new = [{"method": method, "case": f"c{i}", "SD": s, "SSD": s, "pSSD": 0.0, "PRE": 1.0, "REC": f, "F1": f,
            "MES": f, "Dice": 0.0, "clDice": 0.0, "b0_mask": 1.0, "b0_gold": 1.0, "b0_excess": 0.0, "seconds": 1.0}
           for i, (f, s) in enumerate(zip(f1s, ssd))]
    write_tables(old + new, folder, "synthetic_cwmbs_weak_test", "t")
    (folder / f"synthetic_cwmbs_weak_{arch}_300steps_card.md").write_text(
        f"- wall time of the last `fit` call: {wall} s on CPU, torch threads: 1\n")
    (folder / f"synthetic_cwmbs_weak_{arch}_300steps_postprocess_val.md").write_text(
        f"**Chosen: threshold 0.3, gap bridging 0 um, keep every component** (F1 {val_f1}, SSD 8.28)\n")


def test_the_summary_puts_each_network_beside_the_papers_figure(tmp_path):
    """Means over the test volumes (SSD over traced ones), the budget, wall time and val choice from the run's
    own files, the paper's F1 of the same network on CWMBS weak; best first."""
    from neurorefiner.studies.equal_budget import equal_budget_table

    _write_run(tmp_path, "vnet", [0.5, 0.7], [10.0, 20.0], 317, 0.812)
    _write_run(tmp_path, "gbpnet_style", [0.0, 0.9], [float("inf"), 4.0], 400, 0.7)
    text = equal_budget_table(tmp_path, "synthetic_cwmbs_weak")
    lines = [line for line in text.splitlines() if line.startswith("| ") and "300" in line]
    assert lines[0].startswith("| V-Net | 300 | 317 | 0.3 (0.812) | 2 | 100.00 | 60.00 | **60.00** | 15.00 | 80.82 |"
                               " -20.82 |")
    assert lines[1].startswith("| GBP-Net-style | 300 | 400 | 0.3 (0.700) | 2 (1 trace nothing) |")
    assert lines[1].endswith("| 100.00 | 45.00 | **45.00** | 4.00 | 88.91 | -43.91 |")
    assert (tmp_path / "synthetic_cwmbs_weak_summary.csv").exists() and "SYNTHETIC" in text


def test_the_summary_needs_root_seeded_rows(tmp_path):
    import pytest

    from neurorefiner.errors import InputError
    from neurorefiner.evaluation.segmenter_rows import write_tables
    from neurorefiner.studies.equal_budget import equal_budget_table

    write_tables([{"method": "vnet:300steps (threshold 0.3) -> APP2", "case": "a", **{k: 0.5 for k in (
        "SD", "SSD", "pSSD", "PRE", "REC", "F1", "MES", "Dice", "clDice", "b0_mask", "b0_gold", "b0_excess",
        "seconds")}}], tmp_path, "synthetic_cwmbs_weak_test", "t")
    with pytest.raises(InputError, match="no root-seeded rows"):
        equal_budget_table(tmp_path, "synthetic_cwmbs_weak")
