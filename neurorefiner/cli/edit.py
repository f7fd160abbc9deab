"""Apply one instruction-guided TopoRefineNet edit to a mask (e.g. "Repair break at top-right-front")."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def edit(image: Path = typer.Argument(..., help="image stack"),
         mask: Path = typer.Argument(..., help="current mask"),
         instruction: str = typer.Option(..., "--instruction", help="instruction in the grammar"),
         block: str | None = typer.Option(None, "--block", help="z0:z1,y0:y1,x0:x1 (default: whole stack)"),
         out: Path = typer.Option(..., "--out", help="output mask .tif")) -> None:
    missing("TopoRefineNet (neurorefiner.models.toporefinenet)", "issue 6")
