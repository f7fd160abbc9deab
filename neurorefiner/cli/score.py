"""Score a reconstruction (SWC) or mask against a gold SWC: SD, SSD, %SSD, PRE, REC, F1, MES."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, missing


@friendly_errors
def score(gold: Path = typer.Argument(..., help="gold .swc"),
          pred: Path = typer.Argument(..., help="predicted .swc or mask .tif"),
          json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
          spacing: str | None = typer.Option(None, "--spacing", help="z,y,x in um")) -> None:
    missing("reconstruction metrics (neurorefiner.metrics)", "issue 4")
