"""experiments/segmenters/synthetic_rows.sh takes every segmenter of conf/model (seventh round: all eight
networks get synthetic rows) and refuses anything else before it starts work."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "segmenters" / "synthetic_rows.sh"
SEGMENTERS = ("unet3d", "vnet", "unetr", "swinunetr", "nnunet_style", "sgsnet_style", "gbpnet_style",
              "adtlnet_style")


def _run(arch: str, step: str, py: str = "false", presets: str = "synthetic_cwmbs_noise"
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARCH": arch, "STEP": step, "PRESETS": presets, "PY": py}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("arch", SEGMENTERS)
def test_every_segmenter_is_accepted(arch):
    assert (ROOT / "conf" / "model" / f"{arch}.yaml").exists()
    done = _run(arch, "no_such_step")
    assert done.returncode == 2 and "unknown STEP=no_such_step" in done.stderr  # got past the ARCH check


def test_an_unknown_network_is_refused():
    done = _run("resnet", "train")
    assert done.returncode == 2 and "ARCH=resnet: not a segmenter" in done.stderr


def test_table_writers_hold_the_presets_lock():
    """eval and floor read the preset's table, add rows and write it back: two lanes at once would drop rows."""
    text = SCRIPT.read_text()
    for step in ("eval", "floor"):
        body = re.search(rf"\n  {step}\)\n(.*?);;", text, re.S).group(1)
        assert "flock 9" in body and 'lock_of "$preset"' in body


def test_a_misspelt_step_in_a_list_is_refused_before_any_step_runs():
    done = _run("unet3d", "train no_such_step")  # PY=false: had train run first, it would exit 1
    assert done.returncode == 2 and "unknown STEP=no_such_step" in done.stderr


def test_a_list_of_steps_runs_in_order_per_preset(tmp_path):
    log = tmp_path / "calls.txt"
    stub = tmp_path / "py"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    done = _run("vnet", "train choose", py=str(stub), presets="synthetic_cwmbs_weak synthetic_zbfwb")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    scripts = [c.split()[0] for c in calls]
    assert scripts == ["train.py", "experiments/segmenters/synthetic/choose_postprocess.py"] * 2
    assert "dataset=synthetic_cwmbs_weak" in calls[0] and "--dataset synthetic_zbfwb" in calls[3]
    assert "model=vnet" in calls[0]
