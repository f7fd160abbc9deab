"""Choose a segmenter's post-processing (threshold x gap bridging, keep largest) on a SYNTHETIC preset's val
split through APP2, write <preset>_<name>_postprocess_val.{md,csv,json}, and optionally record it in the
checkpoint."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder", ship_to="file")
def choose_postprocess(
        dataset: str = typer.Option(..., "--dataset", help="a synthetic preset (its val split is used)"),
        arch: str = typer.Option(..., "--arch", help="the network the checkpoint must hold"),
        model: list[str] = typer.Option(..., "--model", help="segmenter checkpoint, or NAME=checkpoint (repeatable: "
                                        "several are candidates, chosen with their post-processing, e.g. a run's "
                                        "snapshots)"),
        out: Path = typer.Option(..., "--out", help="folder for the three files"),
        name: str | None = typer.Option(None, "--name", help="names the files (default: --arch); a variant's, "
                                        "e.g. unet3d_prior"),
        threshold: list[float] | None = typer.Option(None, "--threshold", help="a threshold of the grid "
                                                     "(repeatable; default 0.3 0.4 0.5 0.6 0.7)"),
        bridge: list[float] | None = typer.Option(None, "--bridge", help="a gap-bridging distance in um "
                                                  "(repeatable; default 0 3)"),
        threads: int = typer.Option(1, "--threads", help="torch CPU threads"),
        protocol: str = typer.Option("root_seeded", "--protocol", help="how the tables trace: root_seeded (APP2 "
                                     "from the mask voxel nearest the gold root) or full_volume"),
        keep: list[int] | None = typer.Option(None, "--keep", help="keep-largest values of the grid (repeatable; "
                                              "default 0 1; 0 keeps every component)"),
        limit: int | None = typer.Option(None, "--limit", help="only the first N val volumes"),
        record: bool = typer.Option(False, "--record", help="store the choice in the checkpoint"),
        ship_to: Path | None = typer.Option(None, "--ship-to", help="copy the chosen checkpoint here (then "
                                            "--record writes into the copy)")) -> None:
    """Choose post-processing on a preset's val split."""
    from neurorefiner.studies.choose_postprocess import BRIDGE, THRESHOLDS
    from neurorefiner.studies.choose_postprocess import choose_postprocess as run

    typer.echo(run(dataset, arch, list(model), out, name=name, thresholds=tuple(threshold or THRESHOLDS),
                   bridge=tuple(bridge or BRIDGE), threads=threads, record=record, progress=is_tty(),
                   protocol=protocol, keep=tuple(keep if keep is not None else (0, 1)), limit=limit,
                   ship_to=ship_to))


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("choose-postprocess", help=__doc__)(choose_postprocess)
