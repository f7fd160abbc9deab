"""The figure tables of README.md and docs/results.md, rewritten from the experiments/ table CSVs they name
(the <!-- table: PATH ... --> blocks); with --check, nothing is written and the command exits 1 naming every
block that differs from its CSV."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def doc_tables(docs: list[Path] | None = typer.Argument(None, help="Markdown files (default: README.md "
                                                         "docs/results.md)"),
               check: bool = typer.Option(False, "--check", help="write nothing; exit 1 if any block is stale"),
               root: Path | None = typer.Option(None, "--root", help="repository root the CSV paths are read from "
                                         "(default: this checkout)")) -> None:
    """Figure tables in the docs, from the table files."""
    from neurorefiner.evaluation.doc_tables import DOCS, stale_blocks, write_docs
    from neurorefiner.paths import project_root

    base = root or project_root()
    names = docs or list(DOCS)
    if check:
        stale = stale_blocks(base, names)
        for block in stale:
            typer.echo(f"stale: {block.where(base)}")
        if stale:
            typer.echo("rewrite them with: neurorefiner make doc-tables", err=True)
            raise typer.Exit(1)
        typer.echo("every figure block matches its table file")
        return
    for block in write_docs(base, names):
        typer.echo(f"rewrote {block.where(base)}")


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("doc-tables", help=__doc__)(doc_tables)
