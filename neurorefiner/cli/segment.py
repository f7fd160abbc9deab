"""Segment a stack with a trained segmentation network (sliding window) and write the mask."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="file", prob="file")
def segment(image: Path = typer.Argument(..., help="image stack (.tif, .v3draw, .zarr, .npy)"),
            model: Path = typer.Option(..., "--model", help="segmenter checkpoint (.pt export or Lightning .ckpt)"),
            out: Path = typer.Option(..., "--out", help="output mask .tif (uint8 0/255)"),
            prob: Path | None = typer.Option(None, "--prob", help="also write the probability map (.tif, float32)"),
            threshold: float | None = typer.Option(None, help="foreground probability threshold (default: the "
                                                   "checkpoint's recorded setting, else 0.5)"),
            dust: int | None = typer.Option(None, help="drop 26-connected components under N voxels "
                                            "(default: the checkpoint's recorded setting; 0: keep all)"),
            keep_largest: int | None = typer.Option(None, "--keep-largest",
                                                    help="keep only the k largest components (0: all)"),
            bridge_um: float | None = typer.Option(None, "--bridge-um",
                                                   help="join fragments to the largest component across gaps "
                                                   "up to this many um (default: the checkpoint's setting; 0: off)"),
            spacing: str | None = typer.Option(None, "--spacing",
                                               help="voxel size z,y,x in um (default: the file's)"),
            overlap: float = typer.Option(0.25, help="sliding-window overlap (fraction of the patch)"),
            blend: str = typer.Option("gaussian", help="window blending: gaussian | constant"),
            patch: str | None = typer.Option(None, help="window z,y,x (default: wide windows, up to 64,256,256)"),
            arch: str | None = typer.Option(None, help="refuse a checkpoint of another architecture"),
            device: str = typer.Option("cpu", help="cpu | cuda"),
            sw_batch: int = typer.Option(4, "--sw-batch", help="windows per forward pass"),
            channel: int = typer.Option(0, help="channel of a multi-channel stack"),
            threads: int = typer.Option(0, help="torch CPU threads (0: torch's default; 1 on shared cores)")) -> None:
    """Write a binary mask (and optionally the foreground probability) of IMAGE."""
    from neurorefiner.errors import InputError
    from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess, segment_array
    from neurorefiner.io import read_volume, write_volume
    from neurorefiner.io.spacing import CLI, resolve_spacing
    from neurorefiner.postprocessing.masks import PostProcess

    segmenter = load_segmenter(model, expected_arch=arch)
    d = recorded_postprocess(segmenter)
    try:
        post = PostProcess(d.threshold if threshold is None else threshold,
                           d.dust_voxels if dust is None else dust,
                           d.keep_largest if keep_largest is None else keep_largest,
                           d.bridge_um if bridge_um is None else bridge_um)
    except ValueError as exc:
        raise InputError(f"bad post-processing option: {exc}") from exc
    if not 0.0 <= overlap < 1.0:
        raise InputError(f"--overlap must be in [0, 1), got {overlap}")
    if blend not in ("gaussian", "constant"):
        raise InputError(f"--blend must be gaussian or constant, got {blend!r}")
    patch_size = None
    if patch:
        try:
            patch_size = tuple(int(p) for p in patch.split(","))
        except ValueError as exc:
            raise InputError(f"--patch must be three ints z,y,x, got {patch!r}") from exc
        if len(patch_size) != 3 or min(patch_size) < 1:
            raise InputError(f"--patch must be three positive ints z,y,x, got {patch!r}")
    if threads > 0:
        import torch

        torch.set_num_threads(threads)
    vol = read_volume(image, channel=channel)
    voxel = resolve_spacing(spacing, vol, spelling=CLI).values  # no voxel size anywhere: exit 2, nothing written
    mask, probs = segment_array(segmenter, vol.load(), post=post, overlap=overlap, mode=blend,
                                sw_batch_size=max(1, sw_batch), device=device, patch_size=patch_size,
                                progress=True, source=str(image), spacing=voxel)
    write_volume(out, mask, spacing=voxel)
    if prob is not None:
        write_volume(prob, probs, spacing=voxel)
    typer.echo(f"{out}: {int(mask.sum())} foreground voxels of {mask.size} ({segmenter.arch}, "
               f"window {'wide (default)' if patch_size is None else patch_size}, {post.as_dict()})")
