"""A per-stack F1 table from the rows evaluate.py keeps under OUT/rows (for scripts that run evaluate.py once per
segmenter into one OUT), written with its title, date, command and the rows' commit."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(target="file")
def rows_table(out: Path = typer.Argument(..., help="the out_dir the script passed to evaluate.py"),
               split: str = typer.Option("test", "--split"),
               method: list[str] = typer.Option(..., "--method", help="a method's name, or name=label (the row's "
                                                "label, commas allowed); repeat, in the table's order"),
               title: str = typer.Option(..., "--title"),
               command: str = typer.Option(..., "--command", help="the command named in the table's header"),
               target: Path = typer.Option(..., "--target", help="the Markdown file to write")) -> None:
    from neurorefiner.evaluation.rows_table import write_rows_table

    typer.echo(write_rows_table(out, split, method, title, command, target))


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("rows-table", help=__doc__)(rows_table)
