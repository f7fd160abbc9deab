"""Removals near a tile's cut faces are left alone: a piece that continues past the region a task reads is
not the small isolated piece it looks like there.

Why: a task sees its tile plus a halo. A neurite that leaves that region is cut at the region's face, and the
part inside may be small enough for the Inspector to call it noise (``FP``) or a stray branch
(``FP_ATTACHED``) and delete it, although in the whole volume it is part of a long fibre. This is the
face-merging idea of chunked connected components, asked only where it matters: the task reads one more voxel
plane beyond each cut face (a face that is not the volume's own border), and a piece of the region's mask
that touches a face voxel with a 26-neighbour foreground across the face continues in the neighbour. Its
removal is dropped here and the piece is judged by a task in whose region it lies whole (or by nobody, if it
is longer than a region: such a piece is no speck). Joins are not touched: a join adds voxels between two
ends both inside the region, whatever lies beyond.

With no cut face (the volume is one tile) the wrapper passes every flag through unchanged.
"""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.roles import Flag, GlobalView, Inspection, Inspector
from neurorefiner.topology.blocks import Slices
from neurorefiner.topology.components import label_components

REMOVALS = ("FP", "FP_ATTACHED")


def continuing_face_points(region: Slices, shape: tuple[int, ...], read_mask) -> np.ndarray:  # type: ignore[no-untyped-def]
    """(N, 3) region coordinates of face voxels of ``region`` that have a foreground 26-neighbour just outside
    it, over the faces that are not the volume's border. ``read_mask(slices)`` reads the input mask (bool)."""
    from scipy.ndimage import binary_dilation

    points: list[np.ndarray] = []
    size = [s.stop - s.start for s in region]
    for axis in range(3):
        for side in (0, 1):
            at = region[axis].start - 1 if side == 0 else region[axis].stop
            if at < 0 or at >= shape[axis]:
                continue  # the volume's own border: nothing continues there
            outside = list(region)
            outside[axis] = slice(at, at + 1)
            plane = np.squeeze(np.asarray(read_mask(tuple(outside)), bool), axis=axis)
            if not plane.any():
                continue
            reach = binary_dilation(plane, structure=np.ones((3, 3), bool))
            coords = np.argwhere(reach)
            face = 0 if side == 0 else size[axis] - 1
            points.append(np.insert(coords, axis, face, axis=1))
    return np.concatenate(points).astype(np.int64) if points else np.zeros((0, 3), np.int64)


class BorderGuard:
    """An :class:`~neurorefiner.agents.roles.Inspector` that drops the removals of ``inner`` on pieces that
    continue past the region's cut faces (``face_points``, from :func:`continuing_face_points`)."""

    def __init__(self, inner: Inspector, face_points: np.ndarray, tip_margin: int = 2) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "inspector")
        self.face_points = np.asarray(face_points, np.int64).reshape(-1, 3)
        self.tip_margin = int(tip_margin)

    def inspect(self, view: GlobalView) -> Inspection:
        inspection = self.inner.inspect(view)
        if not len(self.face_points) or not inspection.flags:
            return inspection
        mask = np.asarray(view.mask, bool)
        touching = self.face_points[mask[tuple(self.face_points.T)]]
        if not len(touching):
            return inspection
        labels, _ = label_components(mask)
        continuing = set(np.unique(labels[tuple(touching.T)]).tolist()) - {0}
        flags: dict[int, Flag] = {}
        dropped = 0
        for bid, flag in inspection.flags.items():
            kept = tuple(d for d in flag.defects if not self._continues(d, labels, continuing, touching))
            dropped += len(flag.defects) - len(kept)
            if kept or not flag.defects:
                flags[bid] = Flag(flag.block, flag.kind, kept, flag.reason)
        if dropped:
            inspection.info.notes.append(f"{dropped} removal(s) left alone: the piece continues past the tile's "
                                         "region (whole-volume engine)")
        return Inspection(flags, inspection.info)

    def _continues(self, defect, labels: np.ndarray, continuing: set, touching: np.ndarray) -> bool:  # type: ignore[no-untyped-def]
        if defect.kind not in REMOVALS or not defect.anchors:
            return False
        anchor = tuple(int(v) for v in defect.anchors[0])
        if not all(0 <= a < n for a, n in zip(anchor, labels.shape)):
            return False
        if defect.kind == "FP":
            return int(labels[anchor]) in continuing
        # an attached branch whose tip is at a cut face may be no tip at all
        return bool((np.abs(touching - np.asarray(anchor)).max(axis=1) <= self.tip_margin).any())
