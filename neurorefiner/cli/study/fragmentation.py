"""How initial masks break along the gold path (runs, breaks per mm, the root's piece), per dataset and
segmenter: what the SYNTHETIC stand-ins are calibrated on against DIADEM dev (fragmentation.md, _cases.csv)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


def parse_dataset_spec(spec: str, segmenter: str) -> tuple[str, str, str]:
    """``dataset:split[:segmenter]`` -> (dataset, split, segmenter), the segmenter defaulting to ``segmenter``:
    one report can put several segmenters' masks of a preset beside DIADEM's."""
    from neurorefiner.errors import InputError

    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(f"--dataset {spec!r}: give dataset:split or dataset:split:segmenter, e.g. diadem:dev")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else segmenter


@friendly_errors
@writes(out="folder")
def fragmentation(dataset: list[str] = typer.Option(..., "--dataset", help="dataset:split[:segmenter], repeatable "
                                                    "(e.g. diadem:dev, synthetic_cwmbs_weak:test:nnunet_style)"),
                  segmenter: str = typer.Option("unet3d", "--segmenter",
                                                help="whose initial masks (the cache), where --dataset names none"),
                  out: Path = typer.Option(..., "--out", help="output folder"),
                  limit: int | None = typer.Option(None, "--limit", help="first N cases of each split"),
                  tol_um: float = typer.Option(2.0, "--tol-um", help="a gold point is covered within this")) -> None:
    """Fragmentation of initial masks along the gold path."""
    from neurorefiner.studies.fragmentation import dataset_fragmentation, write_report

    rows = []
    for spec in dataset:
        name, split, seg = parse_dataset_spec(spec, segmenter)
        rows += dataset_fragmentation(name, split, seg, limit, tol_um, progress=is_tty())
    typer.echo(write_report(rows, out))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("fragmentation", help=__doc__)(fragmentation)
