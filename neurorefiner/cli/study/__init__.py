"""``neurorefiner study ...``: the one-off measurements (``neurorefiner.studies``), kept out of the user's
command list so ``neurorefiner --help`` shows only what a user runs.

Each study is one module here with a ``register(app)`` that adds its command(s), found by its place in this
folder: a new study is its code in ``neurorefiner/studies/``, its command module here and its folder under
``experiments/`` (a ``run.sh`` calling ``neurorefiner study <name>``); nothing else changes. The modules import
their study code inside the command, so ``--help`` answers at once. A study only reads: a command that makes a
shipped artifact, or a step of making one, is the pipeline's, under ``neurorefiner make``
(:mod:`neurorefiner.cli.make`)."""

from __future__ import annotations

import typer

from neurorefiner.cli.common import command_group, command_modules

STUDIES: tuple[str, ...] = command_modules(__path__)


def build_app(studies: tuple[str, ...] = STUDIES) -> typer.Typer:
    """The ``study`` sub-app with every module of ``studies`` registered, in that order."""
    return command_group(__name__, studies, "One-off measurements behind the experiments/ tables (editor probes, "
                                            "realism, ceilings).")


app = build_app()
