"""Score segmenters and the naive floor on a dataset split (mask -> APP2 -> metrics, Dice, Betti-0 excess) and
write <stem>.md (means) and <stem>_cases.csv (one row per case and method); --include merges earlier tables."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def segmenter_rows(
        dataset: str = typer.Option("diadem", "--dataset", help="a dataset of the registry"),
        split: str = typer.Option("test", "--split", help="dev | val | test ..."),
        segmenter: list[str] | None = typer.Option(
            None, "--segmenter", help="arch[:variant]=checkpoint (repeatable); arch alone: the shipped checkpoint; "
            "a variant tells two checkpoints of one network apart (rows 'arch:variant', masks in their own folder)"),
        naive: bool = typer.Option(True, "--naive/--no-naive", help="score the naive floor (Otsu + TEASAR / APP2)"),
        dust: int = typer.Option(0, "--dust", help="also score each segmenter's mask after removing components under "
                                 "this many voxels (0: skip)"),
        raw: bool = typer.Option(False, "--raw", help="also score the threshold-only masks (every component: what "
                                 "refinement starts from)"),
        case: list[str] | None = typer.Option(None, "--case", help="only this case (repeatable)"),
        include: list[Path] | None = typer.Option(
            None, "--include", help="rows of an earlier table (*_cases.csv; repeatable) merged after this run's; "
            "the first row of a method and case wins. --no-naive without --segmenter only merges"),
        out: Path = typer.Option(..., "--out", help="folder for <stem>.md and <stem>_cases.csv"),
        stem: str | None = typer.Option(None, "--stem", help="file stem (default <dataset>_<split>[_<cases>])"),
        plot: bool = typer.Option(False, "--plot", help="also <stem>.png: per-case F1 and SSD of every method"),
        threads: int = typer.Option(1, "--threads", help="torch CPU threads for the segmenters"),
        protocol: str = typer.Option("full_volume", "--protocol", help="full_volume (APP2 picks its root) or "
                                     "root_seeded (APP2 from the mask voxel nearest the gold root, as the SYNTHETIC "
                                     "Tables 1-2 and DIADEM score; the rows' labels say which)")) -> None:
    """Rows for the segmenter tables."""
    from neurorefiner.evaluation.segmenter_rows import segmenter_rows as run

    typer.echo(run(dataset, split, out, segmenters=segmenter or (), naive=naive, dust=dust, raw=raw, cases=case,
                   include=include or (), stem=stem, plot=plot, threads=threads, progress=is_tty(),
                   protocol=protocol))


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("segmenter-rows", help=__doc__)(segmenter_rows)
