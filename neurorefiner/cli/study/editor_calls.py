"""Why the editor leaves a dataset's masks alone: a sample of the learned loop's editor calls, each step (the
judge against gold, the network, the decoding, the Validator) recorded on its own (editor_calls_<dataset>.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def editor_calls(dataset: str = typer.Option(..., "--dataset", help="registry name with gold SWCs"),
                 split: str = typer.Option("val", "--split", help="dev/train/val (never test)"),
                 segmenter: str = typer.Option("unet3d", "--segmenter", help="whose initial masks (the cache)"),
                 judge: str | None = typer.Option(None, "--judge", help="the judge (default checkpoints/judge.json)"),
                 out: Path = typer.Option(..., "--out", help="output folder"),
                 sample: int = typer.Option(30, "--sample", min=1, help="joins and removals drawn per case"),
                 limit: int | None = typer.Option(None, "--limit", min=1, help="first N cases"),
                 checkpoint: str | None = typer.Option(None, "--checkpoint", help="editor checkpoint"),
                 group_noise: bool = typer.Option(True, "--group-noise/--no-group-noise",
                                                  help="a block's isolated pieces as one removal, as the loop"),
                 decoding: list[str] = typer.Option([], "--decoding",
                                                    help="KEY=VALUE over the editor's decoding settings, repeatable "
                                                         "(e.g. max_brightness=1.0)"),
                 name: str | None = typer.Option(None, "--name", help="file stem (default editor_calls_<dataset>)")
                 ) -> None:
    """Audit a sample of the editor's calls against gold."""
    from neurorefiner.studies.editor_calls import editor_calls as run

    overrides = parse_overrides(decoding)
    command = (f"neurorefiner study editor-calls --dataset {dataset} --split {split} --segmenter {segmenter} "
               + (f"--judge {judge} " if judge else "") + f"--out {out} --sample {sample}"
               + (f" --limit {limit}" if limit else "") + ("" if group_noise else " --no-group-noise")
               + "".join(f" --decoding {d}" for d in decoding) + (f" --name {name}" if name else ""))
    typer.echo(run(dataset, split, segmenter, judge, out, sample, limit, checkpoint, group_noise,
                   progress=is_tty(), command=command, decoding=overrides, name=name))


def parse_overrides(items: list[str]) -> dict[str, object]:
    """``["max_brightness=1.0"]`` -> ``{"max_brightness": 1.0}`` (values read as JSON where they are: numbers,
    ``true``/``false``; else kept as text)."""
    import json

    from neurorefiner.errors import InputError

    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--decoding {item!r}: give KEY=VALUE, e.g. max_brightness=1.0")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("editor-calls", help=__doc__)(editor_calls)
