"""Finding topological defects in a mask from its components alone (no learning, deterministic).

What a person looks for in the paper's Inspector prompt, written as geometry:

* **FN (a break)**: two large enough components, neither a compact blob of noise (``ends_not_blobs``: the
  noise rule below), whose closest points are within ``gap_max`` voxels, at
  least one of them an *end* facing the other (the component's mass near that point lies behind it,
  away from the gap), and image signal in the gap: the lower quartile along the brightest path between
  the ends (``signal_path``; the straight line otherwise) above ``signal_min`` of the way from background to
  foreground, a bar that shrinks with the gap (``signal_by_gap``: a few dim voxels between facing ends are
  where the segmenter's threshold cut a neurite, a long dark gap is two fibres). Pairs are taken shortest
  first, and only while they join pieces not yet joined, so a chain of fragments gives a chain
  of breaks, not every pair.
* **FP (noise)**: a component that is not the largest, not part of a break, and either tiny
  (``<= fp_max_size`` voxels) or a compact blob (``<= blob_max_size`` voxels and not elongated).

Components are whole-volume ones, so a piece cut at a block border is judged with its continuation.
Distances are in xy voxel units with z scaled by the spacing (anisotropic stacks). The number of
components examined as break candidates is capped (``max_candidates``, largest first), which keeps a
mask of 10,000 specks to linear work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cc3d
import numpy as np
from scipy.spatial import cKDTree

from neurorefiner.agents.pieces import UnionFind, elongation, facing, median_levels, piece_voxels
from neurorefiner.agents.roles import Defect
from neurorefiner.topology.blocks import label_components


@dataclass(frozen=True)
class DetectSettings:
    """Thresholds of the heuristic detector (chosen on development data only, never on test stacks)."""

    fp_max_size: int = 60
    blob_max_size: int = 400
    blob_elongation: float = 2.5
    fn_min_size: int = 20
    gap_max: float = 20.0
    max_candidates: int = 64
    signal_min: float = 0.25
    end_radius: float = 8.0
    signal_path: bool = True      # measure the gap's signal along the brightest path (False: the straight line)
    signal_by_gap: bool = True    # the signal bar is signal_min x gap / gap_max (False: signal_min at any gap)
    ends_not_blobs: bool = True   # a compact piece up to blob_max_size (noise by find_noise's rule) ends no break
    near_tree: int = 0            # also examine up to this many pieces within gap_max of the largest one (the
                                  # tree), whatever their size rank: the breaks that grow the traced tree


def _zscale(spacing: Sequence[float]) -> np.ndarray:
    z, y, x = (float(s) for s in spacing)
    xy = min(y, x)
    return np.array([z / xy, y / xy, x / xy])


def gap_signal(image: np.ndarray, a: np.ndarray, b: np.ndarray, bg: float, fg: float) -> float:
    """How bright the straight gap a->b is, from 0 (background) to 1 (like the foreground): the lower
    quartile of the samples strictly between the two ends."""
    n = int(np.ceil(np.linalg.norm(b - a))) + 1
    if n <= 2:
        return 1.0
    t = np.linspace(0.0, 1.0, n)[1:-1, None]
    pts = np.rint(a[None] + t * (b - a)[None]).astype(int)
    pts = np.clip(pts, 0, np.array(image.shape) - 1)
    return _lower_quartile(image[pts[:, 0], pts[:, 1], pts[:, 2]], bg, fg)


def _lower_quartile(vals: np.ndarray, bg: float, fg: float) -> float:
    """The samples' lower quartile from 0 (background) to 1 (foreground); 0 without contrast."""
    span = fg - bg
    return 0.0 if span <= 1e-6 else float((np.percentile(vals, 25) - bg) / span)


def path_signal(image: np.ndarray, a: np.ndarray, b: np.ndarray, bg: float, fg: float,
                scale: Sequence[float] = (1.0, 1.0, 1.0)) -> float:
    """:func:`gap_signal` along the brightest path a->b (Dijkstra on the image, ``scale`` the voxel size):
    a curved neurite's gap is dark on the straight line and bright along the fibre."""
    from neurorefiner.baselines.classical import brightest_path

    if fg - bg <= 1e-6:
        return 0.0
    path = brightest_path(image, np.asarray(a, int), np.asarray(b, int), scale)
    if len(path) <= 2:
        return 1.0
    return _lower_quartile(image[tuple(np.asarray(path[1:-1]).T)], bg, fg)


def _ends_no_break(local: np.ndarray, scale: np.ndarray, s: DetectSettings) -> bool:
    """A compact blob is noise, not a stretch of neurite (``find_noise``'s own test): it ends no break, so a
    field of specks is not chained into the tree."""
    return s.ends_not_blobs and len(local) <= s.blob_max_size and elongation(local * scale) < s.blob_elongation


def _pieces_near(labels: np.ndarray, boxes: np.ndarray, by_size: Sequence[int], tree_pts: np.ndarray,
                 scale: np.ndarray, s: DetectSettings, exclude: set[int]) -> dict[int, np.ndarray]:
    """Up to ``s.near_tree`` pieces (largest first, blobs excepted) with a voxel within ``gap_max`` of the
    tree, with their voxels. In a mask of thousands of fragments the pieces next to the tree are rarely
    among the largest, and they are the ones whose joins extend what APP2 traces from the root."""
    tree = cKDTree(tree_pts * scale)
    lo_t, hi_t = tree_pts.min(axis=0) * scale, tree_pts.max(axis=0) * scale
    out: dict[int, np.ndarray] = {}
    for c in by_size[1:]:
        if c in exclude:
            continue
        b = np.asarray(boxes[c], dtype=float)
        sep = np.maximum(0.0, np.maximum(b[[0, 2, 4]] * scale - hi_t, lo_t - b[[1, 3, 5]] * scale))
        if np.linalg.norm(sep) > s.gap_max:
            continue
        local = piece_voxels(labels, boxes[c], c)
        if _ends_no_break(local, scale, s):
            continue
        d, _ = tree.query(local * scale, distance_upper_bound=s.gap_max)
        if np.isfinite(d).any():
            out[int(c)] = local
            if len(out) == s.near_tree:
                break
    return out


def find_breaks(mask: np.ndarray, image: np.ndarray, labels: np.ndarray, sizes: np.ndarray,
                spacing: Sequence[float], s: DetectSettings) -> list[tuple[Defect, int, int]]:
    """FN defects (with the two component labels each joins), shortest gap first."""
    scale = _zscale(spacing)
    by_size = [int(c) for c in np.argsort(-sizes) if c > 0 and sizes[c] >= s.fn_min_size]
    if len(by_size) < 2:
        return []
    stats = cc3d.statistics(labels, no_slice_conversion=True)
    boxes = stats["bounding_boxes"]  # per label: z0, z1, y0, y1, x0, x1 (inclusive, array order)
    pts: dict[int, np.ndarray] = {}
    order: list[int] = []
    for c in by_size[: 4 * s.max_candidates]:  # a bounded number of pieces is examined
        local = piece_voxels(labels, boxes[c], c)
        if _ends_no_break(local, scale, s):
            continue
        pts[c] = local
        order.append(c)
        if len(order) == s.max_candidates:
            break
    if s.near_tree > 0 and order and order[0] == by_size[0]:
        near = _pieces_near(labels, boxes, by_size, pts[order[0]], scale, s, exclude=set(order))
        pts.update(near)
        order.extend(near)
    if len(order) < 2:
        return []
    trees = {c: cKDTree(pts[c] * scale) for c in order}
    bg, fg = median_levels(image, mask)
    found: list[tuple[float, Defect, int, int]] = []
    for i, ci in enumerate(order):
        bi = np.asarray(boxes[ci], dtype=float)
        for cj in order[i + 1:]:
            bj = np.asarray(boxes[cj], dtype=float)
            # bounding boxes farther apart than the gap cannot hold a break
            lo_i, hi_i = bi[[0, 2, 4]] * scale, bi[[1, 3, 5]] * scale
            lo_j, hi_j = bj[[0, 2, 4]] * scale, bj[[1, 3, 5]] * scale
            sep = np.maximum(0.0, np.maximum(lo_i - hi_j, lo_j - hi_i))
            if np.linalg.norm(sep) > s.gap_max:
                continue
            small, big = (ci, cj) if len(pts[ci]) <= len(pts[cj]) else (cj, ci)
            d, idx = trees[big].query(pts[small] * scale, distance_upper_bound=s.gap_max)
            k = int(np.argmin(d))
            if not np.isfinite(d[k]):
                continue
            p_small, p_big = pts[small][k], pts[big][int(idx[k])]
            a, b = p_small * scale, p_big * scale
            face_small = facing(trees[small], pts[small] * scale, a, b, s.end_radius)
            face_big = facing(trees[big], pts[big] * scale, b, a, s.end_radius)
            if min(face_small, face_big) > -0.5 or max(face_small, face_big) > 0.2:
                continue  # neither is an end facing the other, or one turns away
            dist = float(d[k])
            if s.signal_path:
                signal = path_signal(image, p_small, p_big, bg, fg, scale)
            else:
                signal = gap_signal(image, p_small.astype(float), p_big.astype(float), bg, fg)
            bar = s.signal_min * min(1.0, dist / s.gap_max) if s.signal_by_gap else s.signal_min
            if signal < bar:
                continue
            note = (f"gap {dist:.1f} vox between pieces of {int(sizes[small])} and {int(sizes[big])} voxels, "
                    f"signal {signal:.2f}")
            defect = Defect("FN", (tuple(int(v) for v in p_small), tuple(int(v) for v in p_big)),
                            int(min(sizes[small], sizes[big])), note)
            found.append((dist, defect, small, big))
    found.sort(key=lambda t: (t[0], t[1].anchors))
    joined = UnionFind()
    out = []
    for _, defect, a, b in found:
        if joined.union(a, b):
            out.append((defect, a, b))
    return out


def find_noise(labels: np.ndarray, sizes: np.ndarray, exclude: set[int], spacing: Sequence[float],
               s: DetectSettings) -> list[Defect]:
    """FP defects: tiny pieces and compact blobs, largest first."""
    if len(sizes) <= 2:
        return []
    scale = _zscale(spacing)
    main = int(np.argmax(sizes[1:]) + 1)
    cand = [c for c in np.flatnonzero((sizes > 0) & (sizes <= s.blob_max_size)) if c != main and c not in exclude]
    if not cand:
        return []
    boxes = cc3d.statistics(labels, no_slice_conversion=True)["bounding_boxes"]
    out = []
    for c in sorted(cand, key=lambda c: (-int(sizes[c]), int(c))):
        size = int(sizes[c])
        local = piece_voxels(labels, boxes[c], c)
        if size <= s.fp_max_size:
            note = f"speck of {size} voxels, apart from the tree"
            out.append(Defect("FP", (tuple(int(v) for v in local[0]),), size, note))
            continue
        elong = elongation(local * scale)
        if elong >= s.blob_elongation:
            continue
        centre = local.mean(axis=0)
        anchor = local[int(np.argmin(((local - centre) ** 2).sum(axis=1)))]
        out.append(Defect("FP", (tuple(int(v) for v in anchor),), size,
                          f"compact piece of {size} voxels (elongation {elong:.1f}), apart from the tree"))
    return out


def find_defects(mask: np.ndarray, image: np.ndarray, spacing: Sequence[float] = (1.0, 1.0, 1.0),
                 settings: DetectSettings | None = None, labels: np.ndarray | None = None) -> list[Defect]:
    """Breaks first (shortest gap first), then noise (largest first): the order in which to fix them."""
    s = settings or DetectSettings()
    mask = np.asarray(mask, dtype=bool)
    if labels is None:
        labels, _ = label_components(mask)
    sizes = np.bincount(labels.ravel())
    if len(sizes) <= 2:
        return []
    breaks = find_breaks(mask, np.asarray(image, dtype=np.float32), labels, sizes, spacing, s)
    joined = {c for _, a, b in breaks for c in (a, b)}
    return [d for d, _, _ in breaks] + find_noise(labels, sizes, joined, spacing, s)
