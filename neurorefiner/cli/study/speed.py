"""What the editor's size and additions cost in CPU time: one edit of the largest block the agents send by each
named checkpoint, interleaved on the same block (``editor-speed``), and one training step at the shipped width and
twice it (``width-speed``)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, named_pairs, writes


@friendly_errors
@writes(out="file")
def editor_speed(checkpoints: list[str] = typer.Argument(..., help="NAME=CHECKPOINT; the first is the reference"),
                 threads: int = typer.Option(2, "--threads", min=1, help="torch CPU threads"),
                 repeats: int = typer.Option(5, "--repeats", min=1, help="timed rounds (the median is shown)"),
                 out: Path | None = typer.Option(None, "--out", help="also write the table here (Markdown, with its "
                                                 "title, date, commit and this command)"),
                 title: str = typer.Option("The editor's speed at use", "--title", help="the Markdown file's title")
                 ) -> None:
    """Wall and CPU seconds of one edit of a 64 x 128 x 128 block by each checkpoint (network pass and decoded
    edit), and each one's ratio to the first."""
    from neurorefiner.studies.editor_speed import editor_speed as table
    from neurorefiner.studies.editor_speed import write_editor_speed

    named = named_pairs(checkpoints, "NAME=CHECKPOINT")
    if out is None:
        typer.echo(table(named, threads, repeats), nl=False)
        return
    command = (f"neurorefiner study editor-speed {' '.join(checkpoints)}"
               + (f" --threads {threads}" if threads != 2 else "") + (f" --repeats {repeats}" if repeats != 5 else "")
               + f" --out {out}")
    typer.echo(write_editor_speed(named, out, title, command, threads, repeats), nl=False)


@friendly_errors
def width_speed(steps: int = typer.Option(5, "--steps", min=1, help="timed steps after one warm-up step")) -> None:
    """CPU seconds of one TopoRefineNet training step (batch 2, 32 x 64 x 64 crops, one torch thread) at the
    shipped width and twice it."""
    from neurorefiner.studies.editor_speed import width_speed as run

    for line in run(steps=steps):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add this study's commands to the ``neurorefiner study`` sub-app."""
    app.command("editor-speed", help=editor_speed.__doc__)(editor_speed)
    app.command("width-speed", help=width_speed.__doc__)(width_speed)
