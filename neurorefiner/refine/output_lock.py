"""One output folder, one run: ``refine.py``'s ``out=`` checked before any work, then held by a lock.

Why: two runs writing one folder used to both exit 0 while the second silently replaced the first's
trace, and a bad ``out=`` (a file, a path under a file, an unwritable place, a name that is not UTF-8)
failed with a traceback only after the loop had run, sometimes with half of the outputs written.

* :func:`check_output_dir` tries the path before anything is loaded (what it makes to try, it removes) and raises
  :class:`~neurorefiner.errors.InputError` (exit code 2 through the entry point) naming the path.
* :class:`OutputLock` holds ``<out>/.refine.lock`` with an exclusive ``flock`` for the whole run. The file
  says who holds it (pid, host, inputs) so that a second run can name the first; the kernel drops the
  ``flock`` when its process dies, however it dies, so the lock of a killed run is simply taken over.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from neurorefiner.errors import InputError
from neurorefiner.io.atomic import check_output_path, printable  # noqa: F401 - printable: refine.entry's

LOCK_NAME = ".refine.lock"


def check_output_dir(out: str | Path) -> Path:
    """``out`` as a :class:`Path` if a run could write its outputs there, else an :class:`InputError` that
    names the path and the problem (the check every command makes, :func:`neurorefiner.io.atomic.check_output_path`).
    Leaves the file system as it found it."""
    return check_output_path(out, folder=True, option="out=")


def _alive(holder: dict) -> str:
    """Who holds the lock, in words, from what its file says."""
    if not holder:
        return "another run"
    inputs = ", ".join(f"{k}={v}" for k, v in (holder.get("inputs") or {}).items())
    return f"another run (pid {holder.get('pid')} on {holder.get('host')}{'; ' + inputs if inputs else ''})"


class OutputLock:
    """An exclusive hold on an output folder for one run (a context manager).

    ``inputs`` (e.g. ``{"image": ..., "mask": ...}``) is written into the lock file beside the pid and host,
    for the message a second run prints. Entering creates the folder; a folder held by a live run, or one
    that cannot be created or written, raises :class:`InputError` naming it."""

    def __init__(self, out: str | Path, inputs: dict | None = None) -> None:
        self.out = Path(out)
        self.path = self.out / LOCK_NAME
        self.inputs = {k: str(v) for k, v in (inputs or {}).items()}
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            while True:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _read(fd)
                    os.close(fd)
                    raise InputError(f"the output folder is in use by {_alive(holder)}; wait for it to finish or "
                                     "choose another out=", self.out) from None
                # the holder before us may have removed the file between our open and our flock: ours must
                # be the file that is at the path now, else two runs would each hold a different file
                try:
                    same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    break
                os.close(fd)
            record = {"pid": os.getpid(), "host": socket.gethostname(), "inputs": self.inputs,
                      "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
            self._fd = fd
        except OSError as exc:
            raise InputError(f"the output folder cannot be written: {exc.strerror or exc}", self.out) from None
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)   # removed while still held: a waiter re-checks the inode
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _read(fd: int) -> dict:
    try:
        data = os.pread(fd, 65536, 0)
        return json.loads(data.decode("utf-8")) if data.strip() else {}
    except (OSError, ValueError):
        return {}
