"""The skeleton graph of a mask (``skan``), for the prune candidates and the editor's branch cut."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def skeleton_graph(skeleton: np.ndarray, spacing: Sequence[float] | None = None) -> Any | None:
    """``skan.Skeleton`` of a skeleton image without its isolated voxels (a skeleton voxel with no neighbour
    is a graph without edges, which skan refuses: "index pointer size 0 should be 1"); None when nothing with
    an edge is left."""
    import skan
    from scipy import ndimage as ndi

    skel = np.asarray(skeleton, dtype=bool)
    neighbours = ndi.convolve(skel.astype(np.uint8), np.ones((3,) * skel.ndim, np.uint8), mode="constant")
    skel = skel & (neighbours > 1)
    if skel.sum() < 2:
        return None
    kwargs = {} if spacing is None else {"spacing": tuple(float(v) for v in spacing)}
    return skan.Skeleton(skel, **kwargs)
