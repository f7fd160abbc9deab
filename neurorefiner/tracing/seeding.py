"""Where APP2 starts when the root is given: the mask's foreground voxel nearest the gold tree's root.

The DIADEM metric treats the root as given, so every DIADEM number of this project traces from it; without
a seed, APP2 starts at the thickest part of the mask, and a bright fibre that the gold does not trace can
take the whole reconstruction with it. The same seed serves every method and floor, so the comparison stays
fair.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.io.swc import Tree
from neurorefiner.topology.tree_root import nearest_foreground


def gold_root_zyx(gold: Tree) -> tuple[float, float, float] | None:
    """The first root of ``gold`` (ZYX voxels), None for an empty tree: the soma the protocol gives."""
    if len(gold) == 0:
        return None
    roots = gold.roots()
    root = int(roots[0]) if len(roots) else 0
    z, y, x = (float(v) for v in gold.zyx[root])
    return z, y, x


def marker_nearest_root(mask: np.ndarray, gold: Tree, spacing: Sequence[float] = (1.0, 1.0, 1.0)) -> \
        tuple[float, float, float] | None:
    """APP2 ``marker`` (x, y, z voxels) at the foreground voxel of ``mask`` nearest (in um) to the first root
    of ``gold``; None when the mask is empty or the tree has no node."""
    mask = np.asarray(mask) > 0
    root = gold_root_zyx(gold)
    if not mask.any() or root is None:
        return None
    zz, yy, xx = nearest_foreground(mask, root, spacing)
    return float(xx), float(yy), float(zz)
