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


def _run(arch: str, step: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARCH": arch, "STEP": step, "PRESETS": "synthetic_cwmbs_noise", "PY": "false"}
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
