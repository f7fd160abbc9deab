"""From a changed set of voxels to the instruction that asks for it to be undone.

Shared by the stage-1 defect generators (which know what they changed) and the stage-2 default
instruction writer (which reads the change from the difference with the gold mask), so both speak the
grammar the same way:

* missing foreground (a break) -> ``connect`` from one end of the gap to the other when the gap is long
  (its length along its main direction >= ``long_gap`` voxels) and its ends fall in different cells of
  the 3 x 3 x 3 grid, else ``repair`` at the cell holding most of it;
* extra foreground (noise) -> ``remove ... from A to B`` under the same rule, else ``remove ... at``.

Positions are always relative to the crop the editor is given, and training and use place that crop the
same way (:func:`crop_start`): the defect anywhere at least a quarter of the crop from its border, as the
stage-1 crops hold their defects. The learned Advisor writes its instructions with the functions here
(:func:`describe_join`, :func:`describe_piece`, :func:`describe_branch`) on the voxels an edit would change
in that crop, so the sentence the editor reads in ``refine.py`` comes from the same writer and the same
distribution of places as the sentences it was trained and probed on. A crop centred on every defect
would name ``center-center-center`` every time, and the text would tell the network nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.components import betti0  # noqa: F401 - the defects' name for it
from neurorefiner.topology.instructions import Instruction
from neurorefiner.topology.positions import Position, cell_index, locate

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


def crop_start(centre: Sequence[float], size: Sequence[int], shape: Sequence[int],
               rng: np.random.Generator) -> list[int]:
    """The start of a crop of ``size`` that holds ``centre`` at least a quarter of the crop from its border,
    drawn uniformly (the stage-1 crops' rule), inside a volume of ``shape`` where it is large enough (the
    crop then moves, and the centre may come nearer its border). Used for training crops, the probe's
    blocks and the learned Advisor's editor frames alike, so the places an instruction names are drawn
    from one distribution."""
    out = []
    for c, s, n in zip(centre, size, shape, strict=True):
        c, s, n = int(round(float(c))), int(s), int(n)
        lo, hi = c - s + max(1, s // 4), c - max(1, s // 4)
        start = int(rng.integers(lo, hi + 1)) if hi >= lo else c - s // 2
        out.append(int(np.clip(start, 0, n - s)) if n >= s else (n - s) // 2)
    return out


def _inside(points: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    pts = np.rint(np.asarray(points, dtype=np.float64).reshape(-1, 3)).astype(np.int64)
    return pts[np.all((pts >= 0) & (pts < np.asarray(shape)), axis=1)]


def segment_voxels(a: Sequence[float], b: Sequence[float], radius: int = 1) -> np.ndarray:
    """Voxels (N, 3) of the straight segment from ``a`` to ``b``, thickened by ``radius`` voxels in y and x
    (a neurite's cross-section; one slice in z, where stacks are coarse): what a join paints."""
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = int(np.abs(b_ - a_).max()) + 1
    line = np.rint(a_ + np.linspace(0.0, 1.0, n)[:, None] * (b_ - a_)).astype(np.int64)
    r = int(radius)
    offsets = np.array([(0, dy, dx) for dy in range(-r, r + 1) for dx in range(-r, r + 1)
                        if dy * dy + dx * dx <= r * r])
    return np.unique((line[:, None, :] + offsets[None]).reshape(-1, 3), axis=0)


def _as_mask(points: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    out = np.zeros(tuple(int(s) for s in shape), dtype=bool)
    pts = _inside(points, shape)
    out[tuple(pts.T)] = True
    return out


def describe_join(a: Sequence[float], b: Sequence[float], shape: Sequence[int],
                  long_gap: float = DEFAULT_LONG_GAP) -> Instruction:
    """The instruction for joining the facing ends ``a`` and ``b`` (crop coordinates) of a break: the rule of
    :func:`describe_change` on the voxels the join would fill, as a training break is described by the
    voxels its cut removed."""
    changed = _as_mask(segment_voxels(a, b), shape)
    if not changed.any():
        changed = _as_mask(np.clip(np.asarray([a, b], float), 0, np.asarray(shape) - 1), shape)
    return describe_change(changed, "fn", long_gap)


def describe_piece(coords: np.ndarray, shape: Sequence[int], long_gap: float = DEFAULT_LONG_GAP) -> Instruction:
    """The instruction for removing a piece whose voxels are ``coords`` (N, 3, crop coordinates; the part
    inside the crop is described, as a training crop holds part of a pasted fragment)."""
    changed = _as_mask(coords, shape)
    if not changed.any():
        changed = _as_mask(np.clip(np.asarray(coords, float).reshape(-1, 3), 0, np.asarray(shape) - 1)[:1], shape)
    return describe_change(changed, "fp", long_gap)


def describe_pieces(coords: np.ndarray, shape: Sequence[int]) -> Instruction:
    """The instruction for removing a group of isolated pieces (their voxels ``coords``, crop coordinates):
    ``Remove isolated noise at <cell>`` when they share a cell, else ``Remove noise from <cell> to <cell>``
    from the lowest to the highest cell of their box, whose named region (the hull of the two cells) holds
    every piece; the principal axis of a scattered group would leave pieces off it unnamed."""
    pts = _inside(coords, shape)
    if not len(pts):
        pts = np.clip(np.rint(np.asarray(coords, float).reshape(-1, 3)), 0, np.asarray(shape) - 1).astype(np.int64)
    cells = cell_index(pts, shape)
    lo, hi = cells.min(axis=0), cells.max(axis=0)
    if (lo == hi).all():
        return Instruction("remove", Position.from_cell(lo))
    return Instruction("remove", Position.from_cell(lo), Position.from_cell(hi))


def describe_branch(tip: Sequence[float], junction: Sequence[float], shape: Sequence[int]) -> Instruction | None:
    """``Remove noise from <tip cell> to <junction cell>`` for an attached branch (the stage-1 ``touch``
    defects' form), or None when both fall in one cell of the crop (one cell would read as an isolated
    piece)."""
    pts = np.clip(np.asarray([tip, junction], dtype=np.float64), 0, np.asarray(shape) - 1)
    cells = cell_index(pts, shape)
    if (cells[0] == cells[1]).all():
        return None
    return Instruction("remove", Position.from_cell(cells[0]), Position.from_cell(cells[1]))
