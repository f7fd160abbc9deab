"""Write-then-rename, so a failed or interrupted write never leaves a half-written output."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path, is_dir: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
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
