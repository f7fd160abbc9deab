"""Where the points are: gold-vetted joins, removals and prunes made directly (the ceilings), beside the
initial mask, the classical refiner, the held-out judge's own choices and the learned agents' loop."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def ceilings(dataset: str = typer.Option("diadem", "--dataset", help="registry name (diadem, synthetic_...)"),
             split: str = typer.Option("dev", "--split", help="dev / val only: this study chooses settings"),
             segmenters: str = typer.Option("unet3d,nnunet_style", "--segmenters", help="comma-separated"),
             out: Path = typer.Option(Path("experiments/ceilings"), "--out", help="output folder"),
             loop: bool = typer.Option(True, "--loop/--no-loop", help="also run the learned agents' loop"),
             limit: int | None = typer.Option(None, "--limit", help="first N cases only")) -> None:
    """Ceilings of gold-vetted refinement."""
    from neurorefiner.studies.ceilings import ceilings as run

    typer.echo(run(dataset, split, [s for s in segmenters.split(",") if s], out, loop, limit, progress=is_tty()))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("ceilings", help=__doc__)(ceilings)
