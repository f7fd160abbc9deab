"""Reconstruct a neuron (APP2) from a mask or image and write an SWC."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


def _parse_marker(text: str | None) -> tuple[float, float, float] | None:
    from neurorefiner.errors import InputError

    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError as exc:
        raise InputError(f"--marker must be x,y,z in voxels, got {text!r}") from exc
    if len(parts) != 3:
        raise InputError(f"--marker must be three numbers x,y,z in voxels, got {text!r}")
    return parts[0], parts[1], parts[2]


def _parse_bkg(text: str) -> float | str:
    from neurorefiner.errors import InputError

    if text.lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError as exc:
        raise InputError(f"--bkg-thresh must be a number (8-bit scale) or 'auto', got {text!r}") from exc


@friendly_errors
@writes(out="file")
def trace(path: Path = typer.Argument(..., help="mask or image stack (.tif, .v3draw, .v3dpbd, .zarr, .npy)"),
          out: Path = typer.Option(..., "--out", help="output .swc"),
          spacing: str | None = typer.Option(None, "--spacing", help="z,y,x in um (default: from the file)"),
          bkg_thresh: str = typer.Option("10", "--bkg-thresh", help="background threshold (8-bit) or 'auto'"),
          marker: str | None = typer.Option(None, "--marker", help="root x,y,z in voxels (default: GSDT max)"),
          cnn_type: int = typer.Option(2, "--cnn-type", help="1 = 6-, 2 = 18-, 3 = 26-neighbours"),
          length_thresh: float = typer.Option(5.0, "--length-thresh", help="minimum segment length"),
          sr_ratio: float = typer.Option(1.0 / 3.0, "--sr-ratio", help="coverage pruning signal/redundancy"),
          gsdt: bool = typer.Option(False, "--gsdt", help="march on the grey-weighted distance transform"),
          allow_gap: bool = typer.Option(False, "--allow-gap", help="let a path cross one dark voxel"),
          all_components: bool = typer.Option(False, "--all-components",
                                              help="trace every component, not only the root's"),
          downsample: bool = typer.Option(False, "--downsample", help="APP2's 256-cube downsampling"),
          resample: float = typer.Option(10.0, "--resample", help="final node spacing (0 = every voxel)"),
          channel: int = typer.Option(0, help="channel of a multichannel stack")) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.io import read_volume, write_swc
    from neurorefiner.io.spacing import CLI, resolve_spacing
    from neurorefiner.tracing.app2 import app2

    if out.suffix.lower() != ".swc":
        raise InputError("output must end in .swc", out)
    vol = read_volume(path, channel=channel)
    sp = resolve_spacing(spacing, vol, spelling=CLI).values  # no voxel size anywhere: exit 2, nothing written
    data = vol.load()
    if data.size == 0:
        raise InputError("the stack is empty", path)
    kind = "mask" if _is_binary(data) else "image"
    try:
        tree = app2(data, sp, is_mask=kind == "mask", bkg_thresh=_parse_bkg(bkg_thresh), cnn_type=cnn_type,
                    marker=_parse_marker(marker), length_thresh=length_thresh, sr_ratio=sr_ratio,
                    is_gsdt=gsdt, is_break_accept=allow_gap, all_components=all_components,
                    downsample=downsample, resample_step=resample or None)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc), path) from exc
    write_swc(out, tree, extra_comments=[f"source: {path} ({kind}), spacing z,y,x = {tuple(sp)} um"])
    if len(tree) == 0:
        typer.echo(f"{path}: no foreground above the background threshold: wrote an empty reconstruction "
                   f"to {out}", err=True)
    else:
        typer.echo(f"{out}: {len(tree)} nodes, {int((tree.n_children() == 0).sum())} tips, "
                   f"length {tree.total_length(sp):.1f} um (traced the {kind})")


def _is_binary(data) -> bool:  # type: ignore[no-untyped-def]
    import numpy as np

    if data.dtype == bool:
        return True
    sample = data if data.size <= 64**3 * 8 else data[::2, ::2, ::2]
    values = np.unique(sample)
    return len(values) <= 2 and values[0] == 0 and (len(values) == 1 or values[-1] in (1, 255, 65535))
