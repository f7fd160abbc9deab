"""The naive floor every learned segmenter must beat: Otsu threshold, dust removal, TEASAR skeleton.

No learning and no tuning on any split: Otsu picks the threshold per stack, components under
``dust_voxels`` are dropped, and kimimaro's TEASAR turns each remaining component into a tree. Tracing
only the largest component mimics APP2 from a single root; tracing every component is the generous
variant. Both rows are reported.

Speed: kimimaro's ``fix_branching`` runs one Dijkstra search per traced path so that branch points sit
where paths diverge. That is affordable on real stacks (DIADEM's Otsu components have at most ~31k voxels,
~1 s per stack), but on a noisy stack Otsu can split the background itself: on the SYNTHETIC presets the
mask is one 26-connected sponge holding ~40% of the volume (5-13M voxels), TEASAR needs ~7,400 paths to
cover it and the per-path searches take over 10 minutes. Above ``FIX_BRANCHING_MAX_VOXELS`` voxels in the
largest component the skeleton therefore uses kimimaro's single shortest-path tree instead (same root,
target rule and invalidation balls; each path follows that tree until it meets earlier paths instead of
joining the nearest traced voxel), which covers such a stack in ~20 s. Not free: on a noise sponge that
skeleton is larger (a 256x128x128 crop: 43.7k nodes against 16.7k), and on DIADEM it would move the floor's
F1 by up to 0.013 per stack. Stacks below the bound (all of DIADEM) are traced exactly as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.io.swc import Tree

FIX_BRANCHING_MAX_VOXELS = 1_000_000
"""Largest component (voxels) still skeletonised with kimimaro's per-path ``fix_branching``; its cost grows
with component size x number of paths (on one synthetic sponge: 1.8M voxels 8 s, 3.1M voxels over 5 min)."""


def otsu_mask(image: np.ndarray, dust_voxels: int = 100) -> np.ndarray:
    """Binary mask: voxels above the stack's Otsu threshold, minus 26-connected components smaller than
    ``dust_voxels``. A constant image gives an empty mask."""
    import cc3d
    from skimage.filters import threshold_otsu

    img = np.asarray(image, dtype=np.float32)
    if img.ndim != 3:
        raise ValueError(f"expected a 3D (z, y, x) image, got shape {img.shape}")
    if not np.isfinite(img).all():
        raise ValueError("image holds NaN/inf voxels")
    if img.max() <= img.min():
        return np.zeros(img.shape, dtype=bool)
    mask = img > threshold_otsu(img)
    if dust_voxels > 0 and mask.any():
        mask = cc3d.dust(mask, threshold=int(dust_voxels), connectivity=26, in_place=False)
    return mask.astype(bool)


def _skeleton_to_tree(vertices_zyx: np.ndarray, edges: np.ndarray, radii: np.ndarray) -> Tree:
    """Undirected skeleton graph -> rooted forest (one root per connected part), by breadth-first search."""
    n = len(vertices_zyx)
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if a != b:
            adj[int(a)].append(int(b))
            adj[int(b)].append(int(a))
    parent = np.full(n, -2, dtype=np.int64)
    order = []
    degree = np.array([len(a) for a in adj])
    # start each part at an end point (a leaf), as a traced neuron would
    for start in list(np.flatnonzero(degree == 1)) + list(range(n)):
        if parent[start] != -2:
            continue
        parent[start] = -1
        queue = [int(start)]
        while queue:
            v = queue.pop(0)
            order.append(v)
            for w in adj[v]:
                if parent[w] == -2:
                    parent[w] = v
                    queue.append(w)
    # re-index so parents come before children
    pos = np.empty(n, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
    ordered = np.asarray(order, dtype=np.int64)
    par = np.array([-1 if parent[v] < 0 else pos[parent[v]] for v in ordered], dtype=np.int64)
    return Tree.from_points(vertices_zyx[ordered], par, radii[ordered])


def use_fix_branching(largest_component_voxels: int, max_voxels: int | None = FIX_BRANCHING_MAX_VOXELS) -> bool:
    """Whether kimimaro's per-path ``fix_branching`` is affordable for a mask whose largest skeletonised
    component has this many voxels (``max_voxels=None``: always)."""
    return max_voxels is None or int(largest_component_voxels) <= int(max_voxels)


def teasar_tree(mask: np.ndarray, spacing: Sequence[float] = (1.0, 1.0, 1.0), largest_only: bool = True,
                dust_voxels: int = 100, scale: float = 1.5, const: float = 10.0,
                fix_branching_max_voxels: int | None = FIX_BRANCHING_MAX_VOXELS) -> Tree:
    """TEASAR skeleton (kimimaro) of the mask's components as a Tree in voxel coordinates.

    ``largest_only`` keeps the largest 26-connected component (one root, as APP2 traces); otherwise every
    component becomes its own root. ``scale``/``const`` are TEASAR's invalidation-ball parameters (in um).
    kimimaro's ``fix_branching`` is on unless the largest component exceeds ``fix_branching_max_voxels``
    (None: always on), see the module docstring.
    """
    import cc3d
    import kimimaro

    m = np.asarray(mask) > 0
    if not m.any():
        return Tree.empty()
    labels, n = cc3d.connected_components(m, connectivity=26, return_N=True)
    counts = np.bincount(labels.ravel())
    counts[0] = 0
    if largest_only and n > 1:
        labels = (labels == int(np.argmax(counts))).astype(np.uint32)
    fix_branching = use_fix_branching(int(counts.max()), fix_branching_max_voxels)
    sp = tuple(float(s) for s in spacing)
    skels = kimimaro.skeletonize(labels, teasar_params={"scale": scale, "const": const, "pdrf_scale": 100000,
                                                        "pdrf_exponent": 4},
                                 anisotropy=sp, dust_threshold=int(dust_voxels), progress=False,
                                 fix_branching=fix_branching, fix_borders=True, parallel=1)
    verts, edges, radii = [], [], []
    offset = 0
    for skel in skels.values():
        if len(skel.vertices) == 0:
            continue
        verts.append(np.asarray(skel.vertices, np.float64) / np.asarray(sp))  # array axes = z, y, x
        edges.append(np.asarray(skel.edges, np.int64) + offset)
        radii.append(np.asarray(skel.radius, np.float64) / min(sp))
        offset += len(skel.vertices)
    if not verts:
        return Tree.empty()
    return _skeleton_to_tree(np.concatenate(verts), np.concatenate(edges), np.concatenate(radii))
