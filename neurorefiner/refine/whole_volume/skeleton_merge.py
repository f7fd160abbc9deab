"""One SWC for a whole-volume run: the tiles' kimimaro skeletons joined where a neurite crosses a tile border.

Why not ``kimimaro.join_close_components``: it joins *any* two pieces whose nearest vertices are close, so a
gap the refiner left open inside a tile (a break it could not resolve, or a true gap between two neurites)
would be closed in the file a person then traces on. Here only ends of *different* tiles are joined: a tile's
skeleton ends at its interior's faces (``fix_borders``), and the piece that continues it in the neighbouring
tile ends one voxel away, so each end is paired with at most one end of another tile, nearest first, within
``radius``. Pieces inside a tile keep exactly the topology the refined mask gives them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.io.swc import Tree, read_swc

MERGED_SWC = "refined_skeleton.swc"   # what a whole-volume run writes: one SWC for Vaa3D, Fiji's SNT and napari


def depth_first(n: int, edges: np.ndarray) -> list[tuple[int, int]]:
    """(vertex, parent) pairs of a forest in depth-first order (parent -1 for each tree's root), so every parent
    precedes its children, as SWC readers expect."""
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        neighbours[int(a)].append(int(b))
        neighbours[int(b)].append(int(a))
    seen = np.zeros(n, bool)
    order: list[tuple[int, int]] = []
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, -1)]
        while stack:
            v, parent = stack.pop()
            order.append((v, parent))
            for w in neighbours[v]:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, v))
    return order


def border_joins(xyz: np.ndarray, tile_of: np.ndarray, ends: np.ndarray, radius: float) -> np.ndarray:
    """(J, 2) node pairs to join: ends of different tiles within ``radius``, closest pairs first, each end used
    at most once."""
    from scipy.spatial import cKDTree

    if len(ends) < 2:
        return np.zeros((0, 2), np.int64)
    pairs = cKDTree(xyz[ends]).query_pairs(r=radius, output_type="ndarray")
    if len(pairs) == 0:
        return np.zeros((0, 2), np.int64)
    a, b = ends[pairs[:, 0]], ends[pairs[:, 1]]
    keep = tile_of[a] != tile_of[b]
    a, b = a[keep], b[keep]
    order = np.argsort(np.linalg.norm(xyz[a] - xyz[b], axis=1), kind="stable")
    used: set[int] = set()
    joins = []
    for i in order:
        if int(a[i]) in used or int(b[i]) in used:
            continue
        used.update((int(a[i]), int(b[i])))
        joins.append((int(a[i]), int(b[i])))
    return np.asarray(joins, np.int64).reshape(-1, 2)


def merge_tile_skeletons(files: Sequence[Path], spacing: Sequence[float]) -> tuple[Tree, dict]:
    """The tiles' SWCs (um) as one forest, joined across tile borders within twice the coarsest voxel size.

    Returns the tree and counts (nodes, pieces before and after the joins, joins made)."""
    radius = 2.0 * float(max(spacing))
    xyz, rad, tile_of, edges = [], [], [], []
    start = 0
    for t, path in enumerate(sorted(files)):
        tree = read_swc(path)
        if len(tree) == 0:
            continue
        xyz.append(tree.xyz)
        rad.append(tree.radius)
        tile_of.append(np.full(len(tree), t))
        edges.append(tree.edges() + start)
        start += len(tree)
    if not xyz:
        return Tree.empty(), {"nodes": 0, "pieces in tiles": 0, "border joins": 0, "pieces": 0}
    points, radii, tiles = np.concatenate(xyz), np.concatenate(rad), np.concatenate(tile_of)
    tile_edges = np.concatenate(edges).reshape(-1, 2)
    degree = np.bincount(tile_edges.ravel(), minlength=len(points))
    joins = border_joins(points, tiles, np.nonzero(degree <= 1)[0], radius)
    order = depth_first(len(points), np.concatenate([tile_edges, joins]))
    index = np.full(len(points), -1, np.int64)
    for i, (v, _) in enumerate(order):
        index[v] = i
    vertices = np.asarray([v for v, _ in order], np.int64)
    parents = np.asarray([index[p] if p >= 0 else -1 for _, p in order], np.int64)
    merged = Tree.from_points(points[vertices][:, ::-1], parents, radii[vertices])
    counts = {"nodes": len(points), "pieces in tiles": len(points) - len(tile_edges), "border joins": len(joins),
              "pieces": int((parents < 0).sum())}
    return merged, counts
