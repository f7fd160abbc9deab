"""From a changed set of voxels to the instruction that asks for it to be undone.

Shared by the stage-1 defect generators (which know what they changed) and the stage-2 default
instruction writer (which reads the change from the difference with the gold mask), so both speak the
grammar the same way:

* missing foreground (a break) -> ``connect`` from one end of the gap to the other when the gap is long
  (its length along its main direction >= ``long_gap`` voxels) and its ends fall in different cells of
  the 3 x 3 x 3 grid, else ``repair`` at the cell holding most of it;
* extra foreground (noise) -> ``remove ... from A to B`` under the same rule, else ``remove ... at``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.components import betti0  # noqa: F401 - the defects' name for it
from neurorefiner.topology.instructions import Instruction
from neurorefiner.topology.positions import Position, locate

DEFAULT_LONG_GAP = 10.0  # voxels; k in [5, 20] cuts give both forms


def principal_extent(coords: np.ndarray) -> tuple[float, np.ndarray]:
    """Length of a voxel set along its main direction, and each voxel's coordinate along it."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
    if len(coords) < 2:
        return 0.0, np.zeros(len(coords))
    centred = coords - coords.mean(axis=0)
    # main direction = top right-singular vector (3 x 3 problem: cheap)
    _, _, vt = np.linalg.svd(centred.T @ centred)
    proj = centred @ vt[0]
    return float(proj.max() - proj.min()), proj


def end_positions(coords: np.ndarray, shape: Sequence[int], tail: float = 0.15) -> tuple[Position, Position]:
    """Cells of the two ends of an elongated voxel set (the ``tail`` share of voxels at each end of
    its main direction), ordered top before bottom, then left before right, then front before rear."""
    _, proj = principal_extent(coords)
    lo, hi = np.quantile(proj, [tail, 1.0 - tail])
    a = locate(coords[proj <= lo], shape)
    b = locate(coords[proj >= hi], shape)

    def key(p: Position) -> tuple[int, int, int]:
        iz, iy, ix = p.cell
        return (iy, ix, iz)

    return (a, b) if key(a) <= key(b) else (b, a)


def describe_change(changed: np.ndarray, kind: str, long_gap: float = DEFAULT_LONG_GAP) -> Instruction:
    """The instruction that undoes ``changed`` (a boolean (D, H, W) mask of the defect's voxels).

    ``kind`` is ``"fn"`` (foreground missing: connect/repair) or ``"fp"`` (foreground extra: remove).
    """
    if kind not in ("fn", "fp"):
        raise ValueError(f"kind must be 'fn' or 'fp', got {kind!r}")
    coords = np.argwhere(changed)
    if len(coords) == 0:
        raise ValueError("no changed voxels to describe")
    shape = changed.shape
    length, _ = principal_extent(coords)
    if length >= long_gap:
        a, b = end_positions(coords, shape)
        if a != b:
            return Instruction("connect" if kind == "fn" else "remove", a, b)
    return Instruction("repair" if kind == "fn" else "remove", locate(coords, shape))
