"""The vlm agents against a real vision-language model server (``make test-vllm``; not part of ``make test``).

Runs only when ``NEUROREFINER_VLM_BASE_URL`` names a running OpenAI-compatible server (``make serve-vlm`` prints
the vLLM command) and ``NEUROREFINER_VLM_MODEL`` the model it serves; skipped otherwise, so CI never needs one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("NEUROREFINER_VLM_BASE_URL")
MODEL = os.environ.get("NEUROREFINER_VLM_MODEL")

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(not (BASE_URL and MODEL), reason="no VLM server (set NEUROREFINER_VLM_BASE_URL "
                                 "and NEUROREFINER_VLM_MODEL; `make serve-vlm` prints how to start one)")]


def test_refine_with_a_real_vlm_writes_its_trace(tmp_path: Path) -> None:
    from neurorefiner.io import write_volume

    image = np.zeros((16, 96, 96), np.float32)
    mask = np.zeros(image.shape, bool)
    mask[8, 48, 10:40] = mask[8, 48, 46:86] = True  # one neurite cut in the middle
    mask[4, 10:13, 80:83] = True  # one speck
    image[mask] = 1.0
    image[8, 48, 40:46] = 0.6  # the break still has signal
    write_volume(tmp_path / "img.tif", image)
    write_volume(tmp_path / "mask.tif", mask)
    run = subprocess.run([sys.executable, str(ROOT / "refine.py"), f"image={tmp_path / 'img.tif'}",
                          f"mask={tmp_path / 'mask.tif'}", f"out={tmp_path / 'out'}", "agent=vlm",
                          f"agent.base_url={BASE_URL}", f"agent.model={MODEL}", "t_max=1",
                          f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "out" / "trace.jsonl").read_text().splitlines() if line]
    assert any(r.get("backend") == "vlm" for r in records), "no decision of the trace came from the server"
    assert (tmp_path / "out" / "report.html").exists()
