"""Evidence that APP2 and the reconstruction metrics are faithful: hand-built trees, APP2 on DIADEM dev
gold masks, the 51 BigNeuron (gold, APP2) pairs, APP2 on DIADEM dev raw images; a CSV and a Markdown
table each."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def metrics_validation(out: Path = typer.Option(..., "--out", help="output folder"),
                       only: list[str] | None = typer.Option(None, "--only",
                                                             help="table(s) to make: hand | gold | bigneuron | "
                                                             "raw (default: all)")) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.studies.metrics_validation import run

    try:
        for path in run(out, only):
            typer.echo(f"wrote {path.with_suffix('')}.csv/.md")
    except ValueError as exc:
        raise InputError(str(exc)) from None


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("metrics-validation", help=__doc__)(metrics_validation)
