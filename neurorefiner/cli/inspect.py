"""Run the Global Inspector on a mask: blocks, their Betti-0 counts and the FN/FP verdicts."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors


@friendly_errors
def inspect(image: Path = typer.Argument(..., help="image stack"),
            mask: Path = typer.Argument(..., help="mask to inspect"),
            block_size: int = typer.Option(128, "--block-size", help="xy size of the Inspector's blocks"),
            all_blocks: bool = typer.Option(False, "--all", help="list every non-empty block, not only flagged ones"),
            agent: str = typer.Option("learned", "--agent",
                                      help="roles config under conf/agent: learned (the default, as refine.py), "
                                           "heuristic, vlm"),
            spacing: str = typer.Option(None, "--spacing",
                                        help="z,y,x in um (default: from the files; 'assume': 1,1,1 um)"),
            ) -> None:
    """One line per block: id, xy extent, Betti-0 (26-connected components of its 3D region), verdict and
    the defects behind it. Nothing is edited."""
    import numpy as np

    from neurorefiner.errors import InputError
    from neurorefiner.io import check_same_shape, read_mask, read_volume

    if block_size < 1:  # before reading anything: it used to end in a ValueError traceback after the reads
        raise InputError(f"--block-size must be a whole number of voxels >= 1, got {block_size}")
    from neurorefiner.io.spacing import CLI, resolve_spacing
    from neurorefiner.refine.inspect import inspect_volume

    img = read_volume(image)
    msk = read_mask(mask)
    check_same_shape(img, msk)
    m = np.asarray(msk.load(), dtype=bool)
    if not m.any():
        typer.echo(f"{mask}: empty mask, nothing to inspect")
        return
    voxel = resolve_spacing(spacing, img, msk, spelling=CLI).values  # the learned Inspector's reach is in um
    rows = inspect_volume(img.normalized(), m, voxel, block_size=block_size, agent=agent)
    flagged = [r for r in rows if r["verdict"]]
    for r in rows:
        if not (r["verdict"] or (all_blocks and r["foreground"])):
            continue
        ys, xs = r["extent"][1], r["extent"][2]
        line = (f"block {r['block']:>3}  y {ys[0]}:{ys[1]} x {xs[0]}:{xs[1]}  betti0 {r['betti0']:>3}  "
                f"{r['verdict'] or 'ok'}")
        typer.echo(line)
        for d in r["defects"]:
            typer.echo(f"    {d['kind']} at z,y,x {d['anchors']}: {d['note']}")
    typer.echo(f"{len(flagged)} of {len(rows)} blocks flagged"
               + ("" if flagged else ": the morphology looks complete"))
