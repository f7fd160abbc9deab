"""Segmenter checkpoints' cards, from each checkpoint's own metadata (neurorefiner.training.segmenter_cards):
any run's card with the command that made it (``segmenter-card``), and the shipped SYNTHETIC stand-in
segmenters' cards beside their checkpoints (``standin-card``)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="file")
def segmenter_card(checkpoint: Path = typer.Argument(..., help="a segmenter checkpoint (.pt)"),
                   command: str = typer.Option(..., "--command", help="the line that made the checkpoint (the "
                                                                      "card's Command section)"),
                   out: Path = typer.Option(..., "--out", help="the card (.md), written whole or not at all"),
                   title: str | None = typer.Option(None, "--title", help="the card's title (default: the file "
                                                                          "name)")) -> None:
    """Write a segmenter checkpoint's card: how it was made and what it scored on validation, read from the
    checkpoint, with the command that made it."""
    from neurorefiner.training.segmenter_cards import write_segmenter_card

    typer.echo(write_segmenter_card(checkpoint, command, out, title))


@friendly_errors
def standin_card(presets: list[str] = typer.Argument(..., help="synthetic_cwmbs_weak ..."),
                 arch: str = typer.Option("unet3d", "--arch", help="unet3d | nnunet_style")) -> None:
    """Write the card of each preset's shipped stand-in segmenter from its checkpoint's metadata."""
    from neurorefiner.training.segmenter_cards import write_standin_card

    for preset in presets:
        typer.echo(write_standin_card(preset, arch))


def register(app: typer.Typer) -> None:
    """Add these commands to the ``neurorefiner make`` sub-app."""
    app.command("segmenter-card", help=segmenter_card.__doc__)(segmenter_card)
    app.command("standin-card", help=standin_card.__doc__)(standin_card)
