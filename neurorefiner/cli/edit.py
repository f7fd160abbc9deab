"""Apply one instruction-guided TopoRefineNet edit to a mask (e.g. "Repair break at top-right-front")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from neurorefiner.cli.common import friendly_errors, writes
from neurorefiner.errors import InputError

if TYPE_CHECKING:
    import numpy as np


def parse_block(text: str | None, shape: tuple[int, ...]) -> tuple[slice, slice, slice]:
    """'z0:z1,y0:y1,x0:x1' -> slices inside ``shape`` (empty bounds mean the start/end of the axis)."""
    if text is None:
        return (slice(0, shape[0]), slice(0, shape[1]), slice(0, shape[2]))
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3 or any(p.count(":") != 1 for p in parts):
        raise InputError(f"--block must be z0:z1,y0:y1,x0:x1, got {text!r}")
    out = []
    for axis, (part, n) in enumerate(zip(parts, shape, strict=True)):
        lo_s, hi_s = part.split(":")
        try:
            lo = int(lo_s) if lo_s.strip() else 0
            hi = int(hi_s) if hi_s.strip() else n
        except ValueError as exc:
            raise InputError(f"--block bounds must be integers, got {part!r}") from exc
        if not 0 <= lo < hi <= n:
            raise InputError(f"--block {part!r} on axis {'zyx'[axis]} is outside 0:{n} or empty")
        out.append(slice(lo, hi))
    return tuple(out)  # type: ignore[return-value]


@friendly_errors
@writes(out="file")
def edit(image: Path = typer.Argument(..., help="image stack"),
         mask: Path = typer.Argument(..., help="current mask"),
         instruction: str = typer.Option(..., "--instruction", help="instruction in the grammar"),
         block: str | None = typer.Option(None, "--block", help="z0:z1,y0:y1,x0:x1 (default: whole stack)"),
         out: Path = typer.Option(..., "--out", help="output mask .tif"),
         checkpoint: Path | None = typer.Option(None, "--checkpoint",
                                                help="TopoRefineNet checkpoint (default: the loop's, "
                                                     "conf/editor/toporefinenet.yaml: the shipped one)"),
         threshold: float | None = typer.Option(None, "--threshold",
                                                help="foreground probability threshold (default: the loop's, "
                                                     "conf/editor/toporefinenet.yaml)"),
         confine_margin: int | None = typer.Option(None, "--confine-margin",
                                                   help="voxels around the named place the edit may reach; -1 = "
                                                        "anywhere in the block (the network's raw output); "
                                                        "default: the loop's, conf/editor/toporefinenet.yaml"),
         crop_margin: int = typer.Option(16, "--crop-margin",
                                         help="voxels of context around the named place the network sees "
                                              "(a crop, several times faster on large blocks); -1 = the "
                                              "whole block"),
         raw: bool = typer.Option(False, "--raw", help="the network's thresholded output instead of the "
                                                       "topology-aware decoding")) -> None:
    """The mask outside the block is copied unchanged; the block is edited by TopoRefineNet with the
    instruction (positions such as top-left-rear refer to the block), and only near the place it names.
    By default the network's output is decoded by topology (remove only isolated pieces, join pieces
    along the least-cost path or leave the mask unchanged); the reason is printed. The stack around the
    block is the decoding's context, so a neurite leaving the block is never taken for isolated noise. The
    editor's settings (threshold, confinement, the decoding's) are the loop's, conf/editor/toporefinenet.yaml, so
    an instruction edits a crop here as it does in refine.py."""
    import numpy as np

    from neurorefiner.agents.instructions import InstructionParseError, parse_instruction
    from neurorefiner.inference.editor_config import editor_config
    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.io import Volume, check_same_shape, read_mask, read_volume, write_volume

    try:
        parsed = parse_instruction(instruction)
    except InstructionParseError as exc:
        raise InputError(str(exc)) from None
    loop = editor_config()   # the settings the loop's editor is built with
    threshold = float(loop["threshold"]) if threshold is None else threshold
    if confine_margin is None:
        confine_margin = -1 if loop.get("confine_margin") is None else int(loop["confine_margin"])
    if not 0.0 < threshold < 1.0:
        raise InputError(f"--threshold must be in (0, 1), got {threshold}")
    if confine_margin < -1:
        raise InputError(f"--confine-margin must be >= 0, or -1 for no confinement, got {confine_margin}")
    if crop_margin < -1:
        raise InputError(f"--crop-margin must be >= 0, or -1 for the whole block, got {crop_margin}")
    img = read_volume(image)
    msk = read_mask(mask)
    check_same_shape(img, msk)
    sl = parse_block(block, img.shape)
    refiner = TopoRefiner.load(checkpoint or loop.get("checkpoint"), device=str(loop.get("device", "cpu")),
                               threshold=threshold, confine_margin=None if confine_margin == -1 else confine_margin,
                               decoding="raw" if raw else "topology", decoding_config=loop.get("decoding"),
                               crop_margin=None if crop_margin == -1 else crop_margin)
    image_n = img.normalized()
    current = np.asarray(msk.load(), dtype=bool)
    result = current.copy()
    edited = refiner.edit_result(image_n[sl], current[sl], parsed.format(), context=block_context(current, sl))
    result[sl] = edited.mask
    write_volume(out, Volume(result, img.spacing, calibration=img.calibration))  # an uncalibrated input stays so
    changed = int((result != current).sum())
    added = int((result & ~current).sum())
    typer.echo(f"{parsed.format()}: {changed} voxels changed ({added} added, {changed - added} removed) "
               f"in block {block or 'whole stack'} -> {out}")
    typer.echo(f"{edited.decoding} decoding: {edited.reason}")


def block_context(mask: np.ndarray, sl: tuple[slice, slice, slice], halo: int = 2) -> np.ndarray:
    """The mask around the block ``sl`` with ``halo`` voxels on every side (zeros beyond the stack), the
    decoding's view of what continues outside the block."""
    import numpy as np

    shape = tuple(s.stop - s.start + 2 * halo for s in sl)
    ctx = np.zeros(shape, dtype=bool)
    src = tuple(slice(max(0, s.start - halo), min(n, s.stop + halo)) for s, n in zip(sl, mask.shape, strict=True))
    dst = tuple(slice(a.start - (s.start - halo), a.stop - (s.start - halo)) for a, s in zip(src, sl, strict=True))
    ctx[dst] = mask[src]
    return ctx
