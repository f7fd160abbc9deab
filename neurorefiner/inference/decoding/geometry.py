"""Voxel geometry the decodings share: growing a named place, labelling components, a region's box, straight
segments and tubes around a path. Plain numpy / scipy / cc3d on one block."""

from __future__ import annotations

from collections.abc import Sequence

import cc3d
import numpy as np
from scipy import ndimage as ndi


def grow(region: np.ndarray, margin: int) -> np.ndarray:
    """``region`` grown by ``margin`` voxels (box growth; a box region, as every named place is, is grown
    by its bounds without a filter pass over the block)."""
    if margin <= 0:
        return region.copy()
    spans = [np.flatnonzero(region.any(axis=tuple(a for a in range(region.ndim) if a != ax)))
             for ax in range(region.ndim)]
    if all(len(sp) for sp in spans) and int(region.sum()) == int(np.prod([sp[-1] - sp[0] + 1 for sp in spans])):
        out = np.zeros_like(region, dtype=bool)
        out[tuple(slice(max(0, sp[0] - margin), sp[-1] + 1 + margin) for sp in spans)] = True
        return out
    return ndi.maximum_filter(region.astype(np.uint8), size=2 * int(margin) + 1, mode="constant") > 0


def label_components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """26-connected components of ``mask`` (int64 labels, 0 = background) and how many there are: one
    connectivity for every decision the decodings take about pieces."""
    labels, n = cc3d.connected_components(np.ascontiguousarray(mask, dtype=bool), connectivity=26,
                                          return_N=True)
    return labels.astype(np.int64, copy=False), int(n)


def box_of(region: np.ndarray) -> tuple[slice, ...]:
    """The bounding box of a non-empty ``region``: work on a room is done in its box, not over the block."""
    idx = np.argwhere(region)
    lo, hi = idx.min(axis=0), idx.max(axis=0) + 1
    return tuple(slice(int(a), int(b)) for a, b in zip(lo, hi, strict=True))


def straight_line(a: Sequence[int], b: Sequence[int], shape: Sequence[int]) -> np.ndarray:
    """Voxels of the straight segment from ``a`` to ``b`` (26-connected, both ends included)."""
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = int(np.abs(b_ - a_).max()) + 1
    pts = np.rint(a_ + np.linspace(0.0, 1.0, n)[:, None] * (b_ - a_)).astype(np.int64)
    out = np.zeros(tuple(shape), dtype=bool)
    out[tuple(pts.T)] = True
    return out


def tube(path: np.ndarray, radii: tuple[float, float, float]) -> np.ndarray:
    """Voxels within the ellipsoidal tube of half-widths ``radii`` around the ``path`` voxels."""
    sampling = [1.0 / (r + 0.5) for r in radii]
    return ndi.distance_transform_edt(~path, sampling=sampling) <= 1.0
