"""``neurorefiner study ...``: the one-off measurements (``neurorefiner.studies``), kept out of the user's
command list so ``neurorefiner --help`` shows only what a user runs.

Each study is one module here with a ``register(app)`` that adds its command(s), found by its place in this
folder: a new study is its code in ``neurorefiner/studies/``, its command module here and its folder under
``experiments/`` (a ``run.sh`` calling ``neurorefiner study <name>``); nothing else changes. The modules import
their study code inside the command, so ``--help`` answers at once."""

from __future__ import annotations

import importlib
import pkgutil

import typer

STUDIES: tuple[str, ...] = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg))


def build_app(studies: tuple[str, ...] = STUDIES) -> typer.Typer:
    """The ``study`` sub-app with every module of ``studies`` registered, in that order."""
    app = typer.Typer(help="One-off measurements behind the experiments/ tables (editor probes, realism, "
                           "segmenter tables).",
                      no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    for name in studies:
        importlib.import_module(f"{__name__}.{name}").register(app)
    return app


app = build_app()
