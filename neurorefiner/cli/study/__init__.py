"""``neurorefiner study ...``: the one-off measurements (``neurorefiner.studies``), kept out of the user's
command list so ``neurorefiner --help`` shows only what a user runs.

Each study is one module here with a ``register(app)`` that adds its command(s). To add a study, write the
module and put its name in ``STUDIES``; nothing else changes. The modules import their study code inside the
command, so ``--help`` answers at once."""

from __future__ import annotations

import importlib

import typer

STUDIES: tuple[str, ...] = (
    "break_probe",
    "ceilings",
    "choose_postprocess",
    "fragmentation",
    "gold_scope",
    "instructions",
    "judge",
    "metrics_validation",
    "prior_compare",
    "probe_compare",
    "probe_editor",
    "realism",
    "segmenter_cv",
    "segmenter_rows",
    "segmenter_summary",
    "standins",
    "visibility",
)


def build_app(studies: tuple[str, ...] = STUDIES) -> typer.Typer:
    """The ``study`` sub-app with every module of ``studies`` registered, in that order."""
    app = typer.Typer(help="One-off measurements behind the experiments/ tables (editor probes, realism, "
                           "visibility, segmenter tables, cross-validation).",
                      no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    for name in studies:
        importlib.import_module(f"{__name__}.{name}").register(app)
    return app


app = build_app()
