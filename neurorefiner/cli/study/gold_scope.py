"""Diagnostic: the U-Net's and the naive floor's DIADEM scores as the protocol gives them and inside the gold
tracing's extent, with the share of each trace beyond it (gold_scope_<split>.md, _cases.csv, .png)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def gold_scope(split: str = typer.Option("dev", "--split", help="dev (out-of-fold maps) | test (shipped masks)"),
               out: Path = typer.Option(..., "--out", help="output folder"),
               margin: int = typer.Option(10, "--margin", help="voxels added around the gold's box"),
               threshold: float = typer.Option(0.8, "--threshold", help="dev only: the shipped network's threshold"),
               bridge: float = typer.Option(0.0, "--bridge", help="dev only: the shipped network's gap bridging, um"),
               cv_root: Path | None = typer.Option(None, "--cv-root", help="dev only: folder of the cross-validation "
                                                   "runs (default: checkpoints/runs/segment/unet3d)"),
               masks: Path | None = typer.Option(None, "--masks", help="test only: folder of the shipped network's "
                                                 "masks (default: segmenter-rows' cache)")) -> None:
    """Error beyond the gold tracing's extent."""
    from neurorefiner.studies.gold_scope import gold_scope as run

    typer.echo(run(split, out, margin, threshold, bridge, cv_root, masks, progress=is_tty()))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("gold-scope", help=__doc__)(gold_scope)
