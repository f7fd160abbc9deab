"""Describe a stack or SWC file: shape, dtype, spacing, value range; nodes, length, extent for SWC."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def info(path: Path = typer.Argument(..., help="stack (.tif, .v3draw, .v3dpbd, .zarr, .npy) or .swc"),
         channel: int = typer.Option(0, help="channel to use for multichannel stacks")) -> None:
    from neurorefiner.io import read_swc, read_volume

    if path.suffix.lower() == ".swc":
        tree = read_swc(path)
        typer.echo(f"{path}: {len(tree)} nodes, {len(tree.roots())} root(s), "
                   f"{int((tree.n_children() == 0).sum())} tips, {int((tree.n_children() > 1).sum())} branch points")
        if len(tree):
            lo, hi = tree.xyz.min(axis=0), tree.xyz.max(axis=0)
            typer.echo(f"  extent x {lo[0]:.1f}..{hi[0]:.1f}  y {lo[1]:.1f}..{hi[1]:.1f}  z {lo[2]:.1f}..{hi[2]:.1f}")
            typer.echo(f"  total length {tree.total_length():.1f} (file units)")
        return
    vol = read_volume(path, channel=channel)
    data = vol.load()
    voxel = f"spacing (z, y, x) {vol.spacing} um ({vol.calibration})" if vol.calibration else \
        "no voxel size in its metadata (refine and the commands ask for spacing= / --spacing)"
    typer.echo(f"{path}: shape (Z, Y, X) {vol.shape}, {vol.dtype}, {voxel}")
    typer.echo(f"  values {data.min()}..{data.max()}, mean {float(data.mean()):.3f}, "
               f"non-zero {100.0 * float((data > 0).mean()):.2f} %")
