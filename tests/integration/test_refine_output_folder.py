"""refine.py's output folder: one folder, one run (a lock, no silent replacement of another run's outputs),
bad ``out=`` paths refused before any work, and outputs that appear all together or not at all.

The runs are in-process (``neurorefiner.refine.entry.run`` on the composed config) with a scripted editor, so each
takes a second or two; one slow test runs two real ``refine.py`` processes at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from neurorefiner.io import read_volume
from neurorefiner.refine.output_lock import LOCK_NAME, OutputLock
from tests.integration.test_refine_loop import synthetic

ROOT = Path(__file__).resolve().parents[2]
FAKE = ["editor._target_=tests.integration.test_refine_loop.slow_editor", "+editor.delay=0", "loop.block_size=64",
        "progress=false", "report=true"]


def failing_editor(**_: object):  # type: ignore[no-untyped-def]
    """An editor that dies on its first edit (a run killed mid-loop)."""

    class Dies:
        def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
            raise RuntimeError("killed mid-loop")

    return Dies()


def refine_here(overrides: list[str]) -> dict:
    """``python refine.py <overrides>`` in this process (SystemExit as refine.py would exit)."""
    from neurorefiner.refine.entry import run

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="refine", overrides=[*overrides, "paths.output_dir=/tmp/nr-unused"])
    return run(cfg)


def one_error_line(capsys: pytest.CaptureFixture, code: int, exc: pytest.ExceptionInfo) -> str:
    assert exc.value.code == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    return err


@pytest.fixture()
def two_inputs(tmp_path: Path) -> tuple[list[str], list[str]]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    ia, ma = synthetic(a, n_blocks=1)
    ib, mb = synthetic(b, n_blocks=2)
    return [f"image={ia}", f"mask={ma}"], [f"image={ib}", f"mask={mb}"]


def test_another_run_in_a_finished_folder_is_refused_then_overwritten(tmp_path: Path, two_inputs, capsys) -> None:
    first, second = two_inputs
    out = tmp_path / "o"
    refine_here([*first, f"out={out}", *FAKE])
    kept = read_volume(out / "refined_mask.tif").load().copy()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        refine_here([*second, f"out={out}", *FAKE])
    err = one_error_line(capsys, 2, exc)
    assert str(out) in err and "overwrite=true" in err
    assert (read_volume(out / "refined_mask.tif").load() == kept).all()      # the first run's result is intact
    assert not (out / "trace.jsonl.prev").exists() and not (out / LOCK_NAME).exists()

    refine_here([*second, f"out={out}", *FAKE, "overwrite=true"])
    assert read_volume(out / "refined_mask.tif").shape == (32, 64, 128)
    assert (out / "trace.jsonl").read_text().count('"type":"run"') == 1


def test_overwrite_removes_the_old_runs_recorded_requests(tmp_path: Path, two_inputs) -> None:
    """A VLM run's ``requests/`` (prompts and pictures by hash) belongs to its trace; a replacing run drops it."""
    first, second = two_inputs
    out = tmp_path / "o"
    refine_here([*first, f"out={out}", *FAKE])
    stale = out / "requests" / "stale.json"
    stale.parent.mkdir()
    stale.write_text("{}")
    refine_here([*first, f"out={out}", *FAKE])          # the same run again resumes: its requests stay
    assert stale.exists()
    refine_here([*second, f"out={out}", *FAKE, "overwrite=true"])
    assert not stale.parent.exists()


def test_the_same_run_again_resumes_from_its_trace(tmp_path: Path, two_inputs, capsys) -> None:
    first, _ = two_inputs
    out = tmp_path / "o"
    refine_here([*first, f"out={out}", *FAKE])
    before = read_volume(out / "refined_mask.tif").load().copy()
    capsys.readouterr()
    refine_here([*first, f"out={out}", *FAKE])
    assert "resuming from" in capsys.readouterr().err
    assert (read_volume(out / "refined_mask.tif").load() == before).all()


def test_a_folder_held_by_a_live_run_is_refused(tmp_path: Path, two_inputs, capsys) -> None:
    first, second = two_inputs
    out = tmp_path / "o"
    with OutputLock(out, {"image": "first.tif"}):
        with pytest.raises(SystemExit) as exc:
            refine_here([*second, f"out={out}", *FAKE])
    err = one_error_line(capsys, 2, exc)
    assert str(out) in err and f"pid {os.getpid()}" in err and "first.tif" in err
    assert not (out / "trace.jsonl").exists()


def test_a_killed_run_leaves_no_older_outputs_beside_its_trace(tmp_path: Path, two_inputs) -> None:
    first, second = two_inputs
    out = tmp_path / "o"
    refine_here([*first, f"out={out}", *FAKE])
    with pytest.raises(RuntimeError, match="killed mid-loop"):
        refine_here([*second, f"out={out}", *FAKE, "overwrite=true",
                     "editor._target_=tests.integration.test_refine_output_folder.failing_editor"])
    assert (out / "trace.jsonl").exists()
    assert not any((out / n).exists() for n in ("refined_mask.tif", "refined_mask.swc", "report.html"))
    assert not (out / LOCK_NAME).exists()


def test_outputs_are_all_or_nothing(tmp_path: Path, two_inputs, monkeypatch: pytest.MonkeyPatch) -> None:
    import neurorefiner.refine.local as run_mod

    def broken_report(*args: object, **kwargs: object) -> str:
        raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(run_mod, "build_report", broken_report)
    first, _ = two_inputs
    out = tmp_path / "o"
    with pytest.raises(UnicodeEncodeError):
        refine_here([*first, f"out={out}", *FAKE])
    assert sorted(p.name for p in out.iterdir()) == ["trace.jsonl"]


@pytest.mark.parametrize("problem", ["file", "under_file", "not_utf8", "unwritable"])
def test_bad_out_is_exit_2_before_anything_is_loaded(tmp_path: Path, capsys, problem: str) -> None:
    (tmp_path / "f.txt").write_text("x")
    out = {"file": tmp_path / "f.txt", "under_file": tmp_path / "f.txt" / "sub" / "o",
           "not_utf8": tmp_path / "x\udcff", "unwritable": Path("/proc/nr-no-such-place/o")}[problem]
    quoted = str(out).replace("'", "\\'")
    # the inputs do not exist: an error about them would mean they were read before out= was checked
    with pytest.raises(SystemExit) as exc:
        refine_here([f"image={tmp_path / 'missing.tif'}", f"mask={tmp_path / 'missing.tif'}", f"out='{quoted}'"])
    err = one_error_line(capsys, 2, exc)
    assert "missing.tif" not in err
    assert str(out).encode("utf-8", "backslashreplace").decode() in err
    assert not (tmp_path / "x\udcff").exists()


@pytest.mark.slow
def test_two_refine_processes_on_one_folder(tmp_path: Path, two_inputs) -> None:
    first, second = two_inputs
    out = tmp_path / "o"
    env = {**os.environ, "WANDB_MODE": "offline", "PROJECT_ROOT": str(ROOT)}
    slow = [f if not f.startswith("+editor.delay") else "+editor.delay=10" for f in FAKE]   # ~30 s of edits
    cmd = [sys.executable, str(ROOT / "refine.py"), f"hydra.run.dir={tmp_path / 'run'}", f"out={out}", *slow]
    proc = subprocess.Popen([*cmd, *first], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    deadline = time.time() + 300
    while not (out / "trace.jsonl").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    busy = subprocess.run([*cmd, *second], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.wait(timeout=600) == 0, proc.stderr.read() if proc.stderr else ""
    assert busy.returncode == 2, busy.stderr
    assert busy.stderr.strip().count("\n") == 0 and str(out) in busy.stderr and "in use" in busy.stderr
    assert read_volume(out / "refined_mask.tif").shape == (32, 64, 64)        # the first run's result
    assert np.asarray(read_volume(out / "refined_mask.tif").load()).any()


def test_an_input_name_that_is_not_utf8_is_exit_2_before_it_is_read(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        refine_here([f"image='{tmp_path / 'x'}\udcff.tif'", f"mask={tmp_path / 'm.tif'}", f"out={tmp_path / 'o'}"])
    err = one_error_line(capsys, 2, exc)
    assert "image=" in err and "UTF-8" in err and not (tmp_path / "o").exists()
