"""The SYNTHETIC stand-ins' tables: the calibration table, the equal-budget segmenters, the checkpoint choice."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def standins_table(rows: Path = typer.Option(..., "--rows", help="folder of evaluate.py rows"),
                   out: Path = typer.Option(..., "--out", help="where standins.md and standins.csv go"),
                   fresh_seed: int = typer.Option(None, "--fresh-seed",
                                                  help="the rows are of volumes of this dataset seed")) -> None:
    """Write the stand-ins' test rows beside the paper's initial-mask rows (SYNTHETIC)."""
    from neurorefiner.studies.standins import standins_table as run

    typer.echo(run(rows, out, fresh_seed), nl=False)


@friendly_errors
def equal_budget_table(folder: Path = typer.Option(..., "--folder", help="run_standins_equal_budget.sh's OUT"),
                       preset: list[str] = typer.Option(..., "--preset", help="synthetic_cwmbs_weak ... (repeatable)"),
                       ) -> None:
    """Summarise the paper's segmenters at one equal budget on a stand-in preset, beside the paper's F1."""
    from neurorefiner.studies.equal_budget import equal_budget_table as run

    for p in preset:
        typer.echo(run(folder, p), nl=False)


@friendly_errors
def checkpoint_choice_table(folder: Path = typer.Option(..., "--folder", help="run_checkpoint_choice.sh's OUT"),
                            preset: list[str] = typer.Option(..., "--preset", help="synthetic_cwmbs_weak ... "
                                                             "(repeatable)")) -> None:
    """Summarise the stand-in U-Nets' crop pick vs whole-volume snapshot choice on fresh volumes (SYNTHETIC)."""
    from neurorefiner.studies.checkpoint_choice import checkpoint_choice_table as run

    typer.echo(run(folder, list(preset)), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("standins-table", help=standins_table.__doc__)(standins_table)
    app.command("equal-budget-table", help=equal_budget_table.__doc__)(equal_budget_table)
    app.command("checkpoint-choice-table", help=checkpoint_choice_table.__doc__)(checkpoint_choice_table)
