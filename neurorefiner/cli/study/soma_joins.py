"""The joins at the soma's piece of one SYNTHETIC zbfwb stack: the judge's probability, the gates, the piece
check's reading, and how far the largest pieces lie (experiments/soma_piece_check/)."""

from __future__ import annotations

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def soma_joins(case: str = typer.Argument(..., help="a synthetic_zbfwb case, e.g. synthetic_zbfwb_test_001"),
               split: str = typer.Argument(..., help="its split (train, val, test)")) -> None:
    from neurorefiner.studies.soma_joins import soma_joins as probe

    typer.echo("\n".join(probe(case, split)))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("soma-joins", help=__doc__)(soma_joins)
