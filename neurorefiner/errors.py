"""Errors a user can act on.

Every problem with a user's input is raised as :class:`InputError`, a ``ValueError`` whose message
names the file (and line, where there is one) and the problem in one line. The CLI turns it into a
one-line message and exit code 2, never a traceback from deep inside a library.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn


class InputError(ValueError):
    """A user's file or argument is unusable; the message says which and why."""

    def __init__(self, problem: str, path: str | Path | None = None, line: int | None = None):
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        super().__init__(f"{where}{problem}")


def exit_on_user_error(fn):  # type: ignore[no-untyped-def]
    """Decorator for entry-point functions: a user's mistake ends the run with one
    clear line on stderr (exit 2) instead of a traceback (:func:`stop`)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            stop(f"error: {exc}")

    return wrapper


def stop(message: str) -> NoReturn:
    """End a Hydra entry point's run on a user's mistake: ``message`` on stderr, exit code 2, and no folder left
    behind (:func:`drop_new_run_folder`)."""
    import sys

    print(message, file=sys.stderr)
    drop_new_run_folder()
    sys.exit(2)


#: Hydra run folders that did not exist when the run started (noted by ``neurorefiner.cli.launch.OutputPaths``)
_NEW_RUN_FOLDERS: set[Path] = set()


def note_run_folder(path: str | Path) -> None:
    """Remember Hydra's run folder ``path`` as this run's own if it does not exist yet (Hydra makes it next)."""
    folder = Path(path).absolute()
    if not folder.exists():
        _NEW_RUN_FOLDERS.add(folder)


def drop_new_run_folder() -> None:
    """Remove the running job's Hydra folder if this run made it and it holds only Hydra's own files (``.hydra/``,
    the ``.log``): a run stopped by a bad input used to leave one under ``outputs/`` per try. A folder that holds
    anything the run wrote (a trace to resume from, rows), or that was there before, is kept."""
    import shutil

    try:
        from hydra.core.hydra_config import HydraConfig

        folder = Path(HydraConfig.get().runtime.output_dir).absolute()
    except Exception:  # noqa: BLE001 - not under Hydra (a test, the library): nothing of Hydra's to remove
        return
    if folder in _NEW_RUN_FOLDERS and folder.is_dir() and all(
            p.name == ".hydra" or (p.suffix == ".log" and p.is_file()) for p in folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)
