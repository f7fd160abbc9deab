"""Run the Global Inspector on a mask: blocks, their Betti-0 counts and the FN/FP verdicts."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def inspect(image: Path = typer.Argument(..., help="image stack"),
            mask: Path = typer.Argument(..., help="mask to inspect")) -> None:
    missing("the Global Inspector (neurorefiner.agents)", "the agents issue")
