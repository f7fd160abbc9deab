"""Segment a stack with a trained segmentation network (sliding window) and write the mask."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def segment(image: Path = typer.Argument(..., help="image stack"),
            model: Path = typer.Option(..., "--model", help="segmenter checkpoint"),
            out: Path = typer.Option(..., "--out", help="output mask .tif")) -> None:
    missing("baseline segmenters and sliding-window inference (neurorefiner.models.segmenters)", "issue 5")
