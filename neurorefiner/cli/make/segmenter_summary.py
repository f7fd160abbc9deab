"""One table of every baseline segmenter per dataset (DIADEM test, each SYNTHETIC preset's test) from the
per-case tables of segmenter-rows and the training cards: summary.md, summary.csv, summary.png."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def segmenter_summary(
        tables: Path | None = typer.Option(None, "--tables", help="where the rows tables and cards are "
                                           "(default: experiments/segmenters of the checkout)"),
        shipped: Path | None = typer.Option(None, "--shipped", help="folder of the shipped checkpoints' cards "
                                            "(default: checkpoints/segmenters of the checkout)"),
        out: Path | None = typer.Option(None, "--out", help="output folder (default: --tables)"),
        png: bool = typer.Option(True, "--png/--no-png", help="also summary.png")) -> None:
    """Summarise the segmenter tables."""
    from neurorefiner.errors import InputError
    from neurorefiner.evaluation.segmenter_summary import default_sources, write_summary
    from neurorefiner.paths import project_root

    tables = tables or project_root() / "experiments" / "segmenters"
    if not tables.is_dir():
        raise InputError("no such tables folder", tables)
    shipped = shipped or project_root() / "checkpoints" / "segmenters"
    typer.echo(write_summary(default_sources(tables, shipped), out or tables, png=png))


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("segmenter-summary", help=__doc__)(segmenter_summary)
