"""Put several editor probes (``neurorefiner study probe-editor --out DIR``, one per checkpoint) side by side in one
Markdown table: the network alone and with the topology decoding, on the same cut defects."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="file")
def probe_compare(probes: list[str] = typer.Argument(..., help="LABEL=FOLDER, one per probe, in table order"),
                  out: Path = typer.Option(..., "--out", help="the Markdown file to write"),
                  title: str = typer.Option("Editor probes side by side", "--title"),
                  intro: str = typer.Option("", "--intro", help="a paragraph under the title")) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.studies.probe_compare import compare_probes

    entries = []
    for item in probes:
        label, sep, folder = item.partition("=")
        if not sep or not label or not folder:
            raise InputError(f"each probe is LABEL=FOLDER, got {item!r}")
        entries.append((label, Path(folder)))
    path = compare_probes(entries, out, title, intro)
    typer.echo(path.read_text())
    typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("probe-compare", help=__doc__)(probe_compare)
