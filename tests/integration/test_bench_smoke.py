"""Every ``make bench`` case runs to the end (once, at its smallest size): a case cannot rot unseen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_bench_case_runs_in_smoke_mode(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = dict(os.environ, BENCH_SMOKE="1", WANDB_MODE="offline")
    run = subprocess.run([sys.executable, "-m", "bench.run", "--json", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    # The cases are listed under the same environment: a case may name its size, and smoke mode shrinks it.
    listing = subprocess.run([sys.executable, "-c", "import json; from bench.run import discover; "
                              "print(json.dumps([c.name for c in discover()]))"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0, listing.stderr[-3000:]
    names = set(json.loads(listing.stdout.strip().splitlines()[-1]))
    assert {r["case"] for r in json.loads(out.read_text())} == names
