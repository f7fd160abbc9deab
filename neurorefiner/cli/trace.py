"""Reconstruct a neuron (APP2) from a mask or image and write an SWC."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def trace(path: Path = typer.Argument(..., help="mask or image stack"),
          out: Path = typer.Option(..., "--out", help="output .swc")) -> None:
    missing("APP2 tracing (neurorefiner.tracing)", "issue 4")
