"""The editor's declines in a loop's traces and what the retries made of them; what one mask's soma tree gained over
another's, against the gold (experiments/declined_retry/)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def declined_retries(traces: list[Path] = typer.Argument(..., help="loop traces (JSONL), one per volume")) -> None:
    from neurorefiner.studies.declined_retries import retry_counts

    typer.echo("| trace | editor calls | declined | defects declined | accepted after a decline |")
    typer.echo("|---|---|---|---|---|")
    for path in traces:
        c = retry_counts(path)
        typer.echo(f"| {path.stem} | {c.editor_calls} | {c.declined_calls} | {c.declined_defects} | "
                   f"{c.accepted_after_decline} |")


@friendly_errors
def tree_gain(dataset: str = typer.Option(..., help="dataset preset, e.g. synthetic_bigneuron"),
              split: str = typer.Option(...), case: str = typer.Option(...),
              mask_a: Path = typer.Option(..., help="the mask whose soma tree is read (TIFF)"),
              mask_b: Path = typer.Option(..., help="the mask it is compared with (TIFF)")) -> None:
    from neurorefiner.data.registry import get_dataset
    from neurorefiner.errors import InputError
    from neurorefiner.io.stacks import read_mask
    from neurorefiner.studies.declined_retries import tree_gain as gain
    from neurorefiner.tracing.seeding import gold_root_zyx

    found = [c for c in get_dataset(dataset).cases(split) if c.name == case]
    if not found:
        raise InputError(f"{case}: no such case in {dataset} {split}")
    gold = found[0].gold()
    root = gold_root_zyx(gold)
    if root is None:
        raise InputError(f"{case}: its gold tree is empty")
    a, b = read_mask(mask_a), read_mask(mask_b)
    spacing = tuple(found[0].spacing or a.spacing)
    pieces = gain(a.load(), b.load(), root, gold.zyx, spacing)
    typer.echo(f"{case}: pieces of {mask_a.name}'s soma tree (A = {mask_a.parent.name}) that B "
               f"({mask_b.parent.name}) lacks")
    for p in pieces:
        typer.echo(f"piece of {p.voxels} voxels at {p.box}: median {p.gold_median_voxels:.1f} voxels from the gold, "
                   f"{100 * p.near_gold_share:.1f} % within 3 voxels")


def register(app: typer.Typer) -> None:
    """Add this study's commands to the ``neurorefiner study`` sub-app."""
    app.command("declined-retries", help="The editor's declines in loop traces and the edits retries got accepted.")(
        declined_retries)
    app.command("tree-gain", help="What one mask's soma tree holds that another's lacks, against the gold.")(tree_gain)
