"""The output folder's lock and the up-front check of ``out=``: one run per folder, a dead run's lock taken
over, every bad path one InputError naming it, before anything is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neurorefiner.errors import InputError
from neurorefiner.refine.output_lock import LOCK_NAME, OutputLock, check_output_dir

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_hold_is_refused_naming_the_folder_and_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "o"
    with OutputLock(out, {"image": "a.tif", "mask": "a_mask.tif"}):
        assert json.loads((out / LOCK_NAME).read_text())["pid"] == os.getpid()
        with pytest.raises(InputError) as exc:
            OutputLock(out, {"image": "b.tif"}).acquire()
        msg = str(exc.value)
        assert msg.startswith(f"{out}: ") and "in use" in msg and "image=a.tif" in msg and "\n" not in msg
    assert not (out / LOCK_NAME).exists()
    with OutputLock(out):     # free again
        pass


def test_the_lock_of_a_dead_run_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 999999, "host": "gone", "inputs": {}}))   # left by a kill -9
    with OutputLock(out, {"image": "new.tif"}):
        assert json.loads((out / LOCK_NAME).read_text())["inputs"] == {"image": "new.tif"}


def test_a_live_process_holds_it_until_killed(tmp_path: Path) -> None:
    out = tmp_path / "o"
    code = ("import sys, time; from neurorefiner.refine.output_lock import OutputLock; "
            f"OutputLock({str(out)!r}, {{'image': 'other.tif'}}).acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(InputError, match=f"pid {proc.pid}.*other.tif"):
            OutputLock(out).acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 10
    while True:      # the kernel drops a dead process's flock at once; allow for a slow reaper anyway
        try:
            with OutputLock(out):
                break
        except InputError:
            assert time.time() < deadline
            time.sleep(0.1)


@pytest.mark.parametrize(("make", "words"), [
    (lambda t: (t / "f").write_text("x") and t / "f", "existing file"),
    (lambda t: (t / "f").write_text("x") and t / "f" / "a" / "b", "sits under"),
    (lambda t: t / "x\udcff", "not valid UTF-8"),
    (lambda t: Path("/proc/nr-no-such-place/o"), "cannot be written"),
])
def test_bad_output_paths_are_one_line_errors_and_nothing_is_left(tmp_path: Path, make, words: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    out = make(tmp_path)
    with pytest.raises(InputError, match=words) as exc:
        check_output_dir(out)
    assert "\n" not in str(exc.value)
    str(exc.value).encode("utf-8")      # printable even when the path is not
    made = {"f"} if (tmp_path / "f").exists() else set()
    assert set(os.listdir(tmp_path)) == {*before, *made}     # no folder made for the check is left behind


def test_a_good_path_is_tried_and_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "c"
    assert check_output_dir(out) == out
    assert not (tmp_path / "a").exists()
    out.mkdir(parents=True)
    assert check_output_dir(out) == out and list(out.iterdir()) == []
