"""The Advisor's sentences, counted: per trace, the tries, defects, distinct sentences and defects sharing one
(``instruction-census``), and the instruction-placement table on DIADEM test written from the rows and traces
evaluate.py left, with the census appended (``instructions-table``)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="file")
def instruction_census(traces: list[str] = typer.Argument(..., help="trace files (.jsonl) or folders holding them"),
                       out: Path | None = typer.Option(None, "--out", help="also write the table here (Markdown)"),
                       root: Path | None = typer.Option(None, "--root", help="name traces relative to this folder")
                       ) -> None:
    """How much information the Advisor's sentences carry in a run's traces."""
    from neurorefiner.studies.instruction_census import write_census

    typer.echo(write_census(traces, out, root), nl=False)


@friendly_errors
@writes(target="file")
def instructions_table(out: Path = typer.Argument(..., help="the out_dir instructions_test.sh passed to evaluate.py"),
                       split: str = typer.Option("test", "--split"),
                       target: Path = typer.Option(..., "--target", help="the Markdown file to write"),
                       command: str = typer.Option("bash experiments/editor/instructions_test.sh", "--command",
                                                   help="the command named in the table's header")) -> None:
    """Frames placed as training crops against centred frames: F1 per stack and pooled, then the census."""
    from neurorefiner.studies.instructions_table import write

    typer.echo(write(out, split, target, command))


def register(app: typer.Typer) -> None:
    """Add this study's commands to the ``neurorefiner study`` sub-app."""
    app.command("instruction-census", help=instruction_census.__doc__)(instruction_census)
    app.command("instructions-table", help=instructions_table.__doc__)(instructions_table)
