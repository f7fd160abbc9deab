"""Each network with and without the foreground prior on a SYNTHETIC preset, side by side: val Dice and val
traces (what a recipe may decide on) and the test rows (for reading): prior_compare_<preset>.md/.csv/.png."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def prior_compare(preset: str = typer.Option("synthetic_cwmbs_weak", "--preset", help="a SYNTHETIC preset"),
                  tables: Path = typer.Option(..., "--tables", help="where run_synthetic.sh wrote cards and "
                                              "val choices"),
                  out: Path = typer.Option(..., "--out", help="output folder"),
                  seed: list[int] | None = typer.Option(None, "--seed", help="0 = the recipe's run; n > 0: the "
                                                        "SEED=n runs (repeatable; default 0)")) -> None:
    """Foreground prior vs none, every network."""
    from neurorefiner.studies.prior_compare import write_prior_compare

    typer.echo(write_prior_compare(preset, tables, out, tuple(seed or (0,))))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("prior-compare", help=__doc__)(prior_compare)
