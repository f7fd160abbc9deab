"""Otsu threshold masks refined: per stack, the naive mask against NeuroRefiner with the check of a join's far
piece off and on (shipped and held-out judges), and every join to a large piece with what it does."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def otsu_masks(dataset: str = typer.Option("diadem", "--dataset", help="registry name (diadem, synthetic_...)"),
               split: str = typer.Option("dev", "--split", help="dev / val only: this study chooses settings"),
               judge_segmenters: str = typer.Option("unet3d,nnunet_style", "--judge-segmenters",
                                                    help="masks the held-out judges train on (comma-separated)"),
               segmenters: str = typer.Option("otsu,unet3d,nnunet_style", "--segmenters",
                                              help="masks whose joins to large pieces are listed"),
               list_min: int = typer.Option(300, "--list-min", help="list joins to pieces of this many voxels"),
               out: Path = typer.Option(Path("experiments/otsu_masks"), "--out", help="output folder"),
               limit: int | None = typer.Option(None, "--limit", help="first N cases only")) -> None:
    """Otsu masks refined, and the joins to large pieces."""
    from neurorefiner.studies.otsu_masks import otsu_masks as run

    def names(text: str) -> list[str]:
        return [s for s in text.split(",") if s]

    typer.echo(run(dataset, split, out, names(judge_segmenters), names(segmenters), list_min, limit,
                   progress=is_tty()))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("otsu-masks", help=__doc__)(otsu_masks)
