"""The Table 6 variants' training figures (final validation figures, steps and fit time of each variant and
stage) as a Markdown table, read from the metrics files their runs left beside the checkpoints."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def training_figures(runs: Path | None = typer.Option(None, "--runs", help="the variants' checkpoint folders "
                                                      "(default checkpoints/runs/table_6)")) -> None:
    from neurorefiner.studies.training_figures import training_figures as table

    typer.echo(table(runs), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("training-figures", help=__doc__)(training_figures)
