"""The SYNTHETIC stand-ins' calibration table and the cards of their shipped U-Nets."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def standins_table(rows: Path = typer.Option(..., "--rows", help="folder of evaluate.py rows"),
                   out: Path = typer.Option(..., "--out", help="where standins.md and standins.csv go"),
                   fresh_seed: int = typer.Option(None, "--fresh-seed",
                                                  help="the rows are of volumes of this dataset seed")) -> None:
    """Write the stand-ins' test rows beside the paper's initial-mask rows (SYNTHETIC)."""
    from neurorefiner.studies.standins import standins_table as run

    typer.echo(run(rows, out, fresh_seed), nl=False)


@friendly_errors
def standin_card(presets: list[str] = typer.Argument(..., help="synthetic_cwmbs_weak ..."),
                 arch: str = typer.Option("unet3d", "--arch", help="unet3d | nnunet_style")) -> None:
    """Write the card of each preset's shipped stand-in segmenter from its checkpoint's metadata."""
    from neurorefiner.studies.standins import write_standin_card

    for preset in presets:
        typer.echo(write_standin_card(preset, arch))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("standins-table", help=standins_table.__doc__)(standins_table)
    app.command("standin-card", help=standin_card.__doc__)(standin_card)
