"""Write-then-rename, so a failed or interrupted write never leaves a half-written output; and the check
every command makes of its output paths before any work (:func:`check_output_path`)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from neurorefiner.errors import InputError


def printable(path: str | Path) -> str:
    """``path`` as text that can always be printed (bytes that are not UTF-8 shown as ``\\udcff``)."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def check_output_path(path: str | Path, *, folder: bool = False, option: str = "--out") -> Path:
    """``path`` as a :class:`Path` if a command could write its output there (a file, or a ``folder``), else an
    :class:`InputError` naming the path and the problem in one line. Made before any work, so a bad output
    path costs nothing and leaves nothing: what it makes to try the place, it removes. ``option`` is how the
    user gave the path (``--out``, ``out=``), for the message."""
    target = Path(path)
    try:
        str(target).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"the name is not valid UTF-8 (outputs record it); choose another {option}",
                         printable(target)) from None
    if folder and target.exists() and not target.is_dir():
        raise InputError(f"{option} is an existing file, not a folder", target)
    if not folder and target.is_dir():
        raise InputError(f"{option} is an existing folder, not a file", target)
    ancestor = target.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if ancestor != target.absolute() and not ancestor.is_dir():
        raise InputError(f"{option} sits under {ancestor}, which is a file, not a folder", target)
    if not os.access(ancestor if ancestor.is_dir() else ancestor.parent, os.W_OK | os.X_OK):
        what = "the folder" if ancestor == target.absolute() else f"{ancestor} (where it would be made)"
        raise InputError(f"{option} cannot be written: no write permission on {what}", target)
    _try_writing(target.absolute() if folder else target.absolute().parent, ancestor, target, option)
    return target


def _try_writing(folder: Path, ancestor: Path, target: Path, option: str) -> None:
    """Make the missing folders down to ``folder`` and a file in it, then remove what was made: permissions
    alone do not tell (root passes every access check, a read-only or special file system refuses anyway)."""
    made: list[Path] = []
    try:
        for part in reversed([folder, *folder.parents][: max(0, len(folder.parts) - len(ancestor.parts))]):
            part.mkdir()
            made.append(part)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"{option} cannot be written: {exc.strerror or exc}", target) from None
    finally:
        for part in reversed(made):
            part.rmdir()


@contextmanager
def atomic_path(path: str | Path, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is a file: the user's path, not a crash
        check_output_path(target, folder=is_dir, option="the output")
        raise
    suffix = "".join(target.suffixes)
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.stem}.", suffix=f"{suffix}.part", dir=target.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{target.stem}.", suffix=f"{suffix}.part", dir=target.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if tmp.exists():
            os.chmod(tmp, _mode_for(target, is_dir))
        if is_dir and target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _mode_for(target: Path, is_dir: bool) -> int:
    """The permissions a plain ``open``/``mkdir`` would have given: the old file's when it is replaced, else
    the default under the process's umask. ``mkstemp``/``mkdtemp`` make private (0600/0700) files, and a
    refined mask or a results table nobody else in the lab can open is not what a user asked for."""
    if target.exists():
        return target.stat().st_mode & 0o7777
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if is_dir else 0o666) & ~umask


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write a text file (a results table, a card) through :func:`atomic_path`; returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def save_figure_atomic(fig: object, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG through :func:`atomic_path` and close it, so a plot that fails to render
    leaves the previous picture (or none), never a truncated one that Fiji or a browser half-opens."""
    import matplotlib.pyplot as plt

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")  # type: ignore[attr-defined]
    finally:
        plt.close(fig)  # type: ignore[arg-type]
    return Path(path)
