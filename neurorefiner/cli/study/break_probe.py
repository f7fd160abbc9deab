"""How much of a break's gap does TopoRefineNet fill at output thresholds 0.5 to 0.05? Synthetic breaks in
crops of DIADEM OP_6, correct instruction, confined edit; writes break_probe.md."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def break_probe(ckpt: list[Path] = typer.Option(..., "--ckpt", help="checkpoint (repeat to compare)"),
                label: list[str] | None = typer.Option(None, "--label", help="label per checkpoint "
                                                       "(default: file name)"),
                out: Path = typer.Option(..., "--out", help="output folder (break_probe.md)"),
                n: int = typer.Option(16, "--n", help="synthetic breaks"),
                crop: str = typer.Option("32,64,64", "--crop", help="crop z,y,x")) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.studies.break_probe import run

    if label and len(label) != len(ckpt):
        raise InputError("give one --label per --ckpt")
    try:
        size = tuple(int(v) for v in crop.split(","))
    except ValueError:
        size = ()
    if len(size) != 3:
        raise InputError(f"--crop must be three integers z,y,x, got {crop!r}")
    typer.echo(run(ckpt, out, labels=label, n=n, crop=size), nl=False)  # type: ignore[arg-type]


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("break-probe", help=__doc__)(break_probe)
