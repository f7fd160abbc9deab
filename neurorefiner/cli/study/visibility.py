"""Visibility of the labelled neuron, every SYNTHETIC stand-in beside the real DIADEM dev stacks (OP_1-OP_6
only): per-segment local contrast-to-noise of the gold path (visibility.md, visibility_cases.csv,
visibility.png) and xy MIPs with the gold path drawn over them (visibility_mips.png).

    neurorefiner study visibility --out experiments/synthetic_realism/results
"""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def visibility(out: Path = typer.Option(..., "--out", help="output folder"),
               presets: list[str] | None = typer.Option(None, "--preset", help="preset (repeat; default: the "
                                                        "four stand-ins)"),
               split: str = typer.Option("val", "--split", help="train or val (never test)"),
               diadem: list[str] | None = typer.Option(None, "--diadem", help="DIADEM dev stack (repeat; "
                                                       "default OP_1-OP_6; test stacks are refused)")) -> None:
    from neurorefiner.studies.synthetic_visibility import STAND_INS, run

    typer.echo(run(out, presets=presets or STAND_INS, split=split, diadem=diadem or None,
                   log=lambda line: typer.echo(line, err=True)), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("visibility", help=__doc__)(visibility)
