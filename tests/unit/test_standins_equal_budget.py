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


def test_bad_settings_are_refused_before_any_work(tmp_path):
    done, calls = _run(tmp_path, EPOCHS="0")
    assert done.returncode == 2 and "EPOCHS=0" in done.stderr and not calls
    done, calls = _run(tmp_path, STEPS="train evaluate")
    assert done.returncode == 2 and "unknown step evaluate" in done.stderr and not calls
