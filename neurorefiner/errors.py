"""Errors a user can act on.

Every problem with a user's input is raised as :class:`InputError`, a ``ValueError`` whose message
names the file (and line, where there is one) and the problem in one line. The CLI turns it into a
one-line message and exit code 2, never a traceback from deep inside a library.
"""

from __future__ import annotations

from pathlib import Path


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
    clear line on stderr (exit 2) instead of a traceback."""
    import functools
    import sys

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)

    return wrapper
