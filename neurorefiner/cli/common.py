"""What every CLI command shares: one-line errors with exit code 2, output paths checked before any work,
spacing parsing, progress bars."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

import typer

from neurorefiner.errors import InputError

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Turn :class:`InputError` into ``error: <file>: <problem>`` on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except FileNotFoundError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


Kind = Literal["file", "folder"]


def writes(**outputs: Kind) -> Callable[[F], F]:
    """Declare the parameters a command writes to (``out="folder"``, ``prob="file"``) and check each given
    path (:func:`neurorefiner.io.atomic.check_output_path`) before the command does any work: a path under
    a file, a folder where a file goes or an unwritable place is one line and exit code 2 (under
    :func:`friendly_errors`), with nothing written. The declaration is kept as ``outputs`` on the command,
    where the tests read it."""

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn)
        unknown = set(outputs) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{fn.__name__} has no parameter {', '.join(sorted(unknown))}")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from neurorefiner.io.atomic import check_output_path

            given = signature.bind_partial(*args, **kwargs).arguments
            for name, kind in outputs.items():
                if given.get(name) is not None:
                    check_output_path(given[name], folder=kind == "folder", option=option_name(fn, name))
            return fn(*args, **kwargs)

        wrapper.outputs = dict(outputs)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def option_name(fn: Callable[..., Any], name: str) -> str:
    """How a user names parameter ``name`` of command ``fn`` on the command line (``--out``, or ``OUT`` for an
    argument)."""
    decls = getattr(inspect.signature(fn).parameters[name].default, "param_decls", None) or ()
    return next((d for d in decls if d.startswith("--")), name.upper())


def parse_shape(text: str | None, option: str = "--shape") -> tuple[int, int, int] | None:
    """'64,128,128' or '64x128x128' -> (64, 128, 128) as (z, y, x) voxels; anything else -> InputError
    naming ``option``."""
    if text is None:
        return None
    try:
        parts = [int(p) for p in text.replace("x", ",").split(",") if p.strip()]
    except ValueError:
        parts = []
    if len(parts) != 3 or any(p <= 0 for p in parts):
        raise InputError(f"{option} must be three positive integers z,y,x, got {text!r}")
    return parts[0], parts[1], parts[2]


def parse_spacing(text: str | None) -> tuple[float, float, float] | None:
    """'1,0.33,0.33' -> (1.0, 0.33, 0.33) as (z, y, x) um."""
    if text is None:
        return None
    from neurorefiner.io.volume import check_spacing

    try:
        parts = [float(p) for p in text.replace("x", ",").split(",") if p.strip()]
    except ValueError as exc:
        raise InputError(f"--spacing must be three numbers z,y,x in um, got {text!r}") from exc
    return check_spacing(parts, "--spacing")


def is_tty() -> bool:
    return sys.stderr.isatty()


def named_pairs(items: list[str], form: str = "NAME=VALUE") -> dict[str, str]:
    """``["a=x", "b=y, z"]`` -> ``{"a": "x", "b": "y, z"}`` in the order given (split at the first ``=``); an item
    without a name or a value is an :class:`InputError` that shows ``form``."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise InputError(f"each item is {form}, got {item!r}")
        out[name] = value
    return out


def command_modules(path: Iterable[str]) -> tuple[str, ...]:
    """The modules of a command group's folder (``__path__``), sorted: each adds its commands with ``register``."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(path) if not m.ispkg))


def command_group(package: str, modules: Iterable[str], help: str) -> typer.Typer:
    """A sub-app (``neurorefiner study``, ``neurorefiner make``) with ``register(app)`` of each of ``package``'s
    ``modules`` called, in that order. The modules import their work inside the command, so ``--help`` answers
    at once."""
    app = typer.Typer(help=help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    for name in modules:
        importlib.import_module(f"{package}.{name}").register(app)
    return app
