"""Write the initial masks M_init (one segmenter's masks for every case of a dataset split), cached and
resumable; ``python evaluate.py`` makes them on first use, this command makes them ahead of time."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, parse_shape, writes


@friendly_errors
@writes(out="folder")
def init_masks(dataset: str = typer.Option(..., "--dataset", help="registry name: diadem, tiny, synthetic_..."),
               segmenter: str = typer.Option("unet3d", help="unet3d | nnunet_style | ... | otsu (the naive floor)"),
               model: Path | None = typer.Option(None, "--model", help="checkpoint (default: the shipped CPU one)"),
               split: str = typer.Option("test", help="dataset split"),
               out: Path | None = typer.Option(None, "--out",
                                               help="folder (default data/cache/init_masks/<dataset>/<segmenter>)"),
               overwrite: bool = typer.Option(False, "--overwrite", help="recompute cases already written"),
               overlap: float = typer.Option(0.25, help="sliding-window overlap"),
               threshold: float | None = typer.Option(None, help="probability cut (default: the checkpoint's)"),
               dust: int | None = typer.Option(None, help="drop components under N voxels (default: the checkpoint's)"),
               keep_largest: int | None = typer.Option(None, "--keep-largest",
                                                       help="keep the k largest components (default 0: all; "
                                                       "refinement needs the fragments)"),
               bridge_um: float | None = typer.Option(None, "--bridge-um",
                                                      help="join fragments across gaps up to this many um "
                                                      "(default 0: refinement fixes breaks)"),
               window: str | None = typer.Option(None, help="sliding window z,y,x (default: wide windows)"),
               device: str = typer.Option("cpu", help="cpu | cuda"),
               threads: int = typer.Option(0, help="torch CPU threads (0: default; 1 on shared cores)")) -> None:
    """Write M_init for one dataset / segmenter / split (finished cases are skipped, so a run resumes)."""
    check_ranges(overlap, threshold, dust, keep_largest, bridge_um, threads)
    from neurorefiner.inference.init_masks import write_init_masks

    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    overrides = {k: v for k, v in (("threshold", threshold), ("dust_voxels", dust), ("keep_largest", keep_largest),
                                   ("bridge_um", bridge_um)) if v is not None}
    win = parse_shape(window, "--window")
    paths = write_init_masks(dataset, segmenter, model, split, out, overwrite, overlap=overlap, device=device,
                             window=list(win) if win else None, overrides=overrides)
    typer.echo(f"{len(paths)} masks in {paths[0].parent if paths else out}")


def check_ranges(overlap: float, threshold: float | None, dust: int | None, keep_largest: int | None,
                 bridge_um: float | None, threads: int) -> None:
    """Each numeric option within what it means, before any work: an out-of-range value used to be ignored by the
    naive segmenter and to fail deep inside post-processing for the others."""
    from neurorefiner.errors import InputError

    if not 0.0 <= overlap < 1.0:
        raise InputError(f"--overlap must be in [0, 1), got {overlap}")
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise InputError(f"--threshold must be in (0, 1), got {threshold}")
    for option, value in (("--dust", dust), ("--keep-largest", keep_largest), ("--bridge-um", bridge_um),
                          ("--threads", threads)):
        if value is not None and value < 0:
            raise InputError(f"{option} must be >= 0, got {value}")
