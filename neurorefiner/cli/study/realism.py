"""How close are the synthetic presets to real stacks? Every preset against the DIADEM dev stacks (OP_1-OP_6
only): per-volume and median figures (background, local SNR, weak stretches, distractors, morphology) and
two figures (distributions.png, mips.png)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def realism(out: Path = typer.Option(..., "--out", help="output folder"),
            n: int = typer.Option(3, "--n", help="synthetic volumes per preset (seeds 0..n-1)"),
            presets: list[str] | None = typer.Option(None, "--preset", help="preset (repeat; default: all)"),
            diadem: list[str] | None = typer.Option(None, "--diadem",
                                                    help="DIADEM dev stack (repeat; default OP_1-OP_6; test "
                                                    "stacks are refused)")) -> None:
    from neurorefiner.studies.synthetic_realism import PRESETS, run

    typer.echo(run(out, n=n, presets=presets or PRESETS, diadem=diadem or None,
                   log=lambda line: typer.echo(line, err=True)), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("realism", help=__doc__)(realism)
