"""``python -m neurorefiner`` runs the console command from the checkout it is started in (the installed script
runs the editable install's checkout, which a worktree is not)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_neurorefiner_runs_this_checkouts_command() -> None:
    code = ("import runpy, sys; sys.argv = ['neurorefiner', '--help']\n"
            "try:\n    runpy.run_module('neurorefiner', run_name='__main__')\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "import neurorefiner; print(neurorefiner.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "adapt" in out.stdout and "Usage: neurorefiner" in out.stdout
    assert Path(out.stdout.strip().splitlines()[-1]).resolve().is_relative_to(ROOT / "neurorefiner")
