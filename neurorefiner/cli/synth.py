"""Generate a synthetic fluorescence neuron benchmark (images, labels, gold SWC) from a preset."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def synth(preset: str = typer.Argument(..., help="preset name, e.g. tiny, synthetic_cwmbs_weak"),
          out: Path = typer.Option(..., "--out", help="output folder"),
          n: int = typer.Option(4, "--n", help="number of volumes"),
          seed: int = typer.Option(0, "--seed", help="random seed")) -> None:
    missing("the synthetic benchmark generator (neurorefiner.synth)", "issue 3")
