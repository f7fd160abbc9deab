"""Choose a segmenter's post-processing (threshold x gap bridging, keep largest) on its validation cases through
APP2, write <dataset>_<name>_postprocess_val.{md,csv,json}, and record it in the checkpoint (--record): the step
of making a segmenter after its training (neurorefiner.adaptation.segmenter_postprocess)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder", ship_to="file")
def postprocess(
        dataset: str = typer.Option(..., "--dataset", help="registry name: a synthetic preset, or diadem with "
                                    "--split dev --case OP_6"),
        arch: str = typer.Option(..., "--arch", help="the network the checkpoint must hold"),
        model: list[str] = typer.Option(..., "--model", help="segmenter checkpoint, or NAME=checkpoint (repeatable: "
                                        "several are candidates, chosen with their post-processing, e.g. a run's "
                                        "snapshots)"),
        out: Path = typer.Option(..., "--out", help="folder for the three files"),
        name: str | None = typer.Option(None, "--name", help="names the files (default: --arch); a variant's, "
                                        "e.g. unet3d_prior"),
        split: str = typer.Option("val", "--split", help="the validation split (never test); dev for DIADEM, "
                                  "with --case"),
        case: list[str] | None = typer.Option(None, "--case", help="only this case of the split (repeatable), e.g. "
                                              "OP_6, the stack that validated a DIADEM network"),
        threshold: list[float] | None = typer.Option(None, "--threshold", help="a threshold of the grid "
                                                     "(repeatable; default 0.3 0.4 0.5 0.6 0.7)"),
        bridge: list[float] | None = typer.Option(None, "--bridge", help="a gap-bridging distance in um "
                                                  "(repeatable; default 0 3)"),
        threads: int = typer.Option(1, "--threads", help="torch CPU threads"),
        protocol: str = typer.Option("root_seeded", "--protocol", help="how the tables trace: root_seeded (APP2 "
                                     "from the mask voxel nearest the gold root) or full_volume"),
        keep: list[int] | None = typer.Option(None, "--keep", help="keep-largest values of the grid (repeatable; "
                                              "default 0 1; 0 keeps every component)"),
        limit: int | None = typer.Option(None, "--limit", help="only the first N validation volumes"),
        record: bool = typer.Option(False, "--record", help="store the choice in the checkpoint"),
        ship_to: Path | None = typer.Option(None, "--ship-to", help="copy the chosen checkpoint here (then "
                                            "--record writes into the copy)")) -> None:
    """Choose a segmenter's post-processing on its validation cases (and record it in the checkpoint)."""
    from neurorefiner.adaptation.segmenter_postprocess import BRIDGE, THRESHOLDS, choose_postprocess

    typer.echo(choose_postprocess(dataset, arch, list(model), out, name=name, thresholds=tuple(threshold or THRESHOLDS),
                                  bridge=tuple(bridge or BRIDGE), threads=threads, record=record, progress=is_tty(),
                                  protocol=protocol, keep=tuple(keep if keep is not None else (0, 1)), limit=limit,
                                  ship_to=ship_to, split=split, cases=tuple(case or ())))


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("postprocess", help=postprocess.__doc__)(postprocess)
