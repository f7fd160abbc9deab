"""Join mask fragments to the main component across short gaps, so one APP2 trace reaches them.

APP2 traces one connected foreground from one root (the evaluation protocol's setting, no gap jumping), and a
segmentation network breaks a fibre wherever the signal dims (varicose axons: between boutons). The pieces
beyond a break are then either lost (keep-largest) or traced as nothing at all. Bridging draws a thin straight
tube from each fragment of at least ``min_voxels`` to the nearest voxel of the main component when the gap is
at most ``max_um`` micrometres (physical distance, so anisotropic stacks are measured fairly), repeating
``passes`` times so chains of fragments join. Chosen on DIADEM dev by cross-validation
(experiments/segmenters/cv_dev/), not by default: refinement's M_init keeps the breaks it exists to fix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_FRAGMENT_VOXELS = 20
"""Smaller pieces are speckle, not neurite: bridging to them would only add false branches."""


def _crop_box(mask: np.ndarray, margin: Sequence[int]) -> tuple[slice, ...]:
    """The foreground's bounding box grown by ``margin`` voxels per axis, clipped to the volume."""
    box = []
    for axis in range(3):
        hit = np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != axis)))
        box.append(slice(max(int(hit[0]) - margin[axis], 0), min(int(hit[-1]) + margin[axis] + 1, mask.shape[axis])))
    return tuple(box)


def _tube(a: Sequence[int], b: Sequence[int], shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Voxels of a straight line from ``a`` to ``b`` thickened by its 6-neighbours, so the bridge is
    connected under any neighbourhood APP2 may use (a bare 3D line is only 26-connected)."""
    from skimage.draw import line_nd

    line = np.stack(line_nd(a, b, endpoint=True), axis=1)
    steps = np.array([[0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    pts = (line[:, None, :] + steps[None]).reshape(-1, 3)
    pts = pts[np.all((pts >= 0) & (pts < np.asarray(shape)), axis=1)]
    return tuple(pts.T)


def bridge_gaps(mask: np.ndarray, spacing: Sequence[float], max_um: float,
                min_voxels: int = MIN_FRAGMENT_VOXELS, passes: int = 3) -> np.ndarray:
    """``mask`` (bool ZYX) with fragments of >= ``min_voxels`` joined to the largest 26-connected component
    by straight tubes where the gap is <= ``max_um`` (``spacing``: z, y, x micrometres per voxel). Returns a
    new array; nothing is removed."""
    import cc3d
    from scipy import ndimage as ndi

    mask = np.asarray(mask, dtype=bool)
    if mask.ndim != 3:
        raise ValueError(f"expected a 3D (z, y, x) mask, got shape {mask.shape}")
    sp = np.asarray(spacing, dtype=np.float64)
    if sp.shape != (3,) or np.any(sp <= 0):
        raise ValueError(f"spacing must be three positive numbers (z, y, x), got {spacing}")
    out = mask.copy()
    if max_um <= 0 or not mask.any():
        return out
    box = _crop_box(mask, [int(np.ceil(max_um / s)) + 1 for s in sp])
    crop = mask[box]
    labels, n = cc3d.connected_components(crop, connectivity=26, return_N=True)
    if n < 2:
        return out
    sizes = np.bincount(labels.ravel(), minlength=n + 1)
    sizes[0] = 0
    joined = np.zeros(n + 1, bool)
    joined[int(sizes.argmax())] = True
    pending = [c for c in range(1, n + 1) if not joined[c] and sizes[c] >= min_voxels]
    objects = ndi.find_objects(labels)
    offset = np.array([s.start for s in box])
    for _ in range(passes):
        if not pending:
            break
        dist, nearest = ndi.distance_transform_edt(~joined[labels], sampling=sp, return_indices=True)
        still = []
        for c in pending:
            sl = objects[c - 1]
            d = np.where(labels[sl] == c, dist[sl], np.inf)
            k = np.unravel_index(int(np.argmin(d)), d.shape)
            if d[k] > max_um:
                still.append(c)
                continue
            a = np.array([s.start + i for s, i in zip(sl, k, strict=True)])
            b = nearest[(slice(None), *a)]
            out[_tube(a + offset, b + offset, mask.shape)] = True
            joined[c] = True
        if len(still) == len(pending):
            break
        pending = still
    return out
