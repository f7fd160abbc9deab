"""Connected components of a mask, the quantity every part of refinement counts: Betti-0 (26-connectivity,
the neighbourhood APP2 and the paper's metric use) is what the Inspector flags, the defects are made to
change, and the editor and the validator must bring down."""

from __future__ import annotations

import numpy as np


def label_components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """26-connected component labels (2-D masks are treated as one slice) and their number."""
    import cc3d

    m = np.ascontiguousarray(np.asarray(mask) > 0)
    if m.ndim == 2:
        m = m[None]
    labels, n = cc3d.connected_components(m, connectivity=26, return_N=True)
    return labels, int(n)


def betti0(mask: np.ndarray, min_size: int = 1) -> int:
    """Number of 26-connected foreground components with at least ``min_size`` voxels."""
    if not np.asarray(mask).any():
        return 0
    labels, n = label_components(mask)
    if min_size <= 1:
        return n
    counts = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    return int((counts >= min_size).sum())


def component_voxels(labels: np.ndarray, sizes: np.ndarray, seed: tuple[int, ...], radius: int = 16) -> np.ndarray:
    """Coordinates (N, ndim, C order) of the component holding ``seed``, found in a box around the seed
    that doubles until it holds all ``sizes[label]`` voxels: the same answer as ``argwhere(labels == l)``
    without a pass over the whole volume for every small piece."""
    label = int(labels[tuple(seed)])
    if label == 0:
        return np.zeros((0, labels.ndim), dtype=np.int64)
    want = int(sizes[label])
    r = max(int(radius), 1)
    while True:
        lo = [max(int(c) - r, 0) for c in seed]
        hi = [min(int(c) + r + 1, n) for c, n in zip(seed, labels.shape)]
        box = tuple(slice(a, b) for a, b in zip(lo, hi))
        local = np.argwhere(labels[box] == label)
        whole = all(a == 0 and b == n for a, b, n in zip(lo, hi, labels.shape))
        if len(local) >= want or whole:
            return local + np.asarray(lo, dtype=np.int64)
        r *= 2

