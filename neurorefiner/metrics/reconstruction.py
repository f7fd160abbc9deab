"""Reconstruction metrics between a gold and a predicted SWC tree.

* V3D ``neuron_distance`` (Peng et al., Nat. Biotechnol. 2010): every edge of one tree is sampled as V3D
  does (N = int(1.5 + length) evenly spaced points, both ends included) and each sample's distance to the
  *other tree* (nearest point on any of its edges) is taken. ``SD`` (entire-structure average) is the
  mean of the two directed averages; ``SSD`` (different-structure average) averages the samples at
  distance >= ``ssd_thresh`` (2 voxels) in each direction, then over the directions that have any (V3D's
  rule), 0 when none; ``pSSD`` is the fraction of such samples, averaged over the two directions.
* Point precision / recall / F1 and MES (as in ADTL-Net and the work it follows): both trees are resampled
  every ``step`` (2 voxels); a point is matched when it lies within ``tau`` (4 voxels, inclusive) of the
  other tree. PRE = matched predicted points / predicted points, REC = matched gold points / gold points,
  MES = (|G| - miss) / (|G| + extra), with |G| the gold points, miss the unmatched gold points and extra
  the unmatched predicted points (lengths measured in resampled points).

Units: by default voxel coordinates as written in the SWCs (the protocol's "voxels"); ``physical=True``
scales x, y, z by ``spacing`` (z, y, x, um) first, and tau/step/ssd_thresh are then in um.

Empty trees: an empty prediction (or gold) gives PRE = REC = F1 = MES = 0, pSSD = 1 and SD = SSD = inf
(no structure to measure a distance to); never NaN, never an exception.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
from scipy.spatial import cKDTree

from neurorefiner.io.swc import Tree

Spacing = tuple[float, float, float]
KEYS = ("SD", "SSD", "pSSD", "PRE", "REC", "F1", "MES")


def _coords(tree: Tree, spacing: Spacing, physical: bool) -> np.ndarray:
    """(N, 3) xyz in the unit of the comparison."""
    xyz = np.asarray(tree.xyz, dtype=np.float64)
    if physical:
        z, y, x = spacing
        xyz = xyz * np.array([x, y, z])
    return xyz


def _segments(tree: Tree, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edge end points (E, 3) a and b; an isolated node (root without children) is a zero-length edge."""
    e = tree.edges()
    n = len(tree)
    lone = np.ones(n, bool)
    if len(e):
        lone[e.ravel()] = False
    a = np.concatenate([xyz[e[:, 0]], xyz[lone]]) if len(e) else xyz[lone]
    b = np.concatenate([xyz[e[:, 1]], xyz[lone]]) if len(e) else xyz[lone]
    return a, b


def sample_edges(a: np.ndarray, b: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Points along each segment a->b, at most ``step`` apart, the end ``b`` excluded (so shared nodes
    are not counted twice) except for zero-length segments. Returns points and their segment index."""
    length = np.linalg.norm(b - a, axis=1)
    k = np.maximum(1, np.ceil(length / step - 1e-9).astype(np.int64))
    seg = np.repeat(np.arange(len(a)), k)
    start = np.cumsum(k) - k
    t = (np.arange(k.sum()) - np.repeat(start, k)) / np.repeat(k, k)
    pts = a[seg] + t[:, None] * (b[seg] - a[seg])
    return pts, seg


def v3d_samples(a: np.ndarray, b: np.ndarray, unit: float = 1.0) -> np.ndarray:
    """V3D ``dist_directional_swc_1_2`` sampling: N = int(1.5 + length / unit) points from a to b, both
    ends included (one point for a zero-length edge)."""
    length = np.linalg.norm(b - a, axis=1) / unit
    k = (1.5 + length).astype(np.int64)
    k = np.maximum(k, 1)
    seg = np.repeat(np.arange(len(a)), k)
    start = np.cumsum(k) - k
    j = np.arange(k.sum()) - np.repeat(start, k)
    den = np.maximum(np.repeat(k, k) - 1, 1)
    t = j / den
    return a[seg] + t[:, None] * (b[seg] - a[seg])


class TreeDistance:
    """Distance from points to a tree's edges (exact point-to-segment on the k nearest candidates).

    Candidates are the segments owning the k nearest of dense samples (``sample`` apart) along the tree;
    the result is exact unless more than k samples of other segments are nearer than the true segment's
    nearest sample, and never off by more than ``sample / 2``.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, sample: float = 0.5, k: int = 8):
        self.a, self.b = a, b
        pts, self.seg = sample_edges(a, b, sample)
        pts = np.concatenate([pts, b])  # include end points
        self.seg = np.concatenate([self.seg, np.arange(len(b))])
        self.kd = cKDTree(pts)
        self.k = min(k, len(pts))

    def __call__(self, q: np.ndarray) -> np.ndarray:
        if len(q) == 0:
            return np.zeros(0)
        _, idx = self.kd.query(q, k=self.k)
        return _min_segment_distance(np.ascontiguousarray(q, dtype=np.float64), self.seg[idx.reshape(len(q), -1)],
                                     self.a, self.b)


@numba.njit(cache=True)
def _min_segment_distance(q: np.ndarray, segs: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each query point, the least exact point-to-segment distance over its candidate segments."""
    out = np.empty(q.shape[0])
    for i in range(q.shape[0]):
        best = np.inf
        for j in range(segs.shape[1]):
            s = segs[i, j]
            ab0 = b[s, 0] - a[s, 0]
            ab1 = b[s, 1] - a[s, 1]
            ab2 = b[s, 2] - a[s, 2]
            aq0 = q[i, 0] - a[s, 0]
            aq1 = q[i, 1] - a[s, 1]
            aq2 = q[i, 2] - a[s, 2]
            l2 = ab0 * ab0 + ab1 * ab1 + ab2 * ab2
            t = 0.0
            if l2 > 0:
                t = min(1.0, max(0.0, (aq0 * ab0 + aq1 * ab1 + aq2 * ab2) / l2))
            d0 = aq0 - t * ab0
            d1 = aq1 - t * ab1
            d2 = aq2 - t * ab2
            d = d0 * d0 + d1 * d1 + d2 * d2
            if d < best:
                best = d
        out[i] = np.sqrt(best)
    return out


@numba.njit(cache=True)
def _path_arc(pi: np.ndarray, nchild: np.ndarray, elen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every node, the first node of its unbranched path (-1 for roots) and its arc length from the
    path's start (a root or branch point)."""
    n = pi.shape[0]
    first = np.full(n, -2, np.int64)
    arc = np.zeros(n)
    stack = np.empty(n, np.int64)
    for i in range(n):
        if first[i] != -2:
            continue
        top = 0
        j = i
        while j >= 0 and first[j] == -2:
            stack[top] = j
            top += 1
            j = pi[j]
        for t in range(top - 1, -1, -1):
            m = stack[t]
            p = pi[m]
            if p < 0:
                first[m] = -1
            elif pi[p] < 0 or nchild[p] != 1:
                first[m] = m
                arc[m] = elen[m]
            else:
                first[m] = first[p]
                arc[m] = arc[p] + elen[m]
    return first, arc


def resample_points(tree: Tree, xyz: np.ndarray, step: float) -> np.ndarray:
    """Points every ``step`` along each unbranched path (root to branch point, branch point to tip...):
    the roots, then ceil(L / step) evenly spaced points per path of length L, its far end included (the
    same points as ``Tree.resampled``, vectorised; connectivity is not needed for matching)."""
    pi = tree.parent_index
    n = len(pi)
    if n == 0:
        return np.zeros((0, 3))
    has_p = pi >= 0
    elen = np.zeros(n)
    elen[has_p] = np.linalg.norm(xyz[has_p] - xyz[pi[has_p]], axis=1)
    nchild = np.bincount(pi[has_p], minlength=n)
    first, arc = _path_arc(pi.astype(np.int64), nchild, elen)
    e = np.flatnonzero(has_p)
    total = np.zeros(n)
    np.maximum.at(total, first[e], arc[e])
    length = total[first[e]]
    nseg = np.maximum(1, np.ceil(length / step - 1e-9))
    d = np.where(length > 0, length / nseg, 1.0)
    hi = arc[e] / d
    lo = (arc[e] - elen[e]) / d
    k_hi = np.floor(hi + 1e-9).astype(np.int64)
    k_lo = np.floor(lo + 1e-9).astype(np.int64)
    zero = length <= 0  # degenerate (duplicate-node) path: a point per edge
    k_hi[zero] = 1
    k_lo[zero] = 0
    cnt = np.maximum(k_hi - k_lo, 0)
    edge = np.repeat(np.arange(len(e)), cnt)
    kk = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt) + np.repeat(k_lo + 1, cnt)
    c, p = e[edge], pi[e[edge]]
    el = elen[c]
    frac = np.where(el > 0, (arc[c] - kk * d[edge]) / np.where(el > 0, el, 1.0), 0.0)
    frac = np.clip(frac, 0.0, 1.0)  # 0 at the child, 1 at the parent
    pts = xyz[c] + frac[:, None] * (xyz[p] - xyz[c])
    return np.concatenate([xyz[~has_p], pts])


def _extent(xyz: np.ndarray) -> float:
    return float(np.ptp(xyz, axis=0).max()) if len(xyz) > 1 else 0.0


def empty_scores() -> dict[str, float]:
    return {"SD": math.inf, "SSD": math.inf, "pSSD": 1.0, "PRE": 0.0, "REC": 0.0, "F1": 0.0, "MES": 0.0}


def neuron_distance(gold: Tree, pred: Tree, spacing: Spacing = (1.0, 1.0, 1.0), *, ssd_thresh: float = 2.0,
                    physical: bool = False, sample: float = 1.0,
                    _dist: tuple[TreeDistance, TreeDistance] | None = None) -> dict[str, float]:
    """V3D neuron_distance: SD, SSD and pSSD (see module docstring)."""
    if len(gold) == 0 or len(pred) == 0:
        e = empty_scores()
        return {k: e[k] for k in ("SD", "SSD", "pSSD")}
    g, p = _coords(gold, spacing, physical), _coords(pred, spacing, physical)
    ga, gb = _segments(gold, g)
    pa, pb = _segments(pred, p)
    to_gold, to_pred = _dist or (TreeDistance(ga, gb), TreeDistance(pa, pb))
    d12 = to_pred(v3d_samples(ga, gb, sample))
    d21 = to_gold(v3d_samples(pa, pb, sample))
    out = {"SD": float((d12.mean() + d21.mean()) / 2)}
    big = [d[d >= ssd_thresh] for d in (d12, d21)]
    means = [float(b.mean()) for b in big if len(b)]
    out["SSD"] = float(np.mean(means)) if means else 0.0
    out["pSSD"] = float((len(big[0]) / len(d12) + len(big[1]) / len(d21)) / 2)
    return out


def point_scores(gold: Tree, pred: Tree, spacing: Spacing = (1.0, 1.0, 1.0), *, tau: float = 4.0,
                 step: float = 2.0, physical: bool = False,
                 _dist: tuple[TreeDistance, TreeDistance] | None = None) -> dict[str, float]:
    """PRE, REC, F1 and MES from trees resampled every ``step``; matched = within ``tau`` (inclusive)."""
    if len(gold) == 0 or len(pred) == 0:
        e = empty_scores()
        return {k: e[k] for k in ("PRE", "REC", "F1", "MES")}
    gx, px = _coords(gold, spacing, physical), _coords(pred, spacing, physical)
    g, p = resample_points(gold, gx, step), resample_points(pred, px, step)
    to_gold, to_pred = _dist or (TreeDistance(*_segments(gold, gx)), TreeDistance(*_segments(pred, px)))
    dg = to_pred(g)
    dp = to_gold(p)
    tp_g = int((dg <= tau).sum())
    tp_p = int((dp <= tau).sum())
    pre = tp_p / len(p)
    rec = tp_g / len(g)
    f1 = 2 * pre * rec / (pre + rec) if pre + rec > 0 else 0.0
    miss, extra = len(g) - tp_g, len(p) - tp_p
    mes = (len(g) - miss) / (len(g) + extra)
    return {"PRE": float(pre), "REC": float(rec), "F1": float(f1), "MES": float(mes)}


def score_trees(gold: Tree, pred: Tree, spacing: Spacing = (1.0, 1.0, 1.0), *, tau: float = 4.0,
                step: float = 2.0, ssd_thresh: float = 2.0, physical: bool = False) -> dict[str, float]:
    """All reconstruction metrics: keys SD, SSD, pSSD, PRE, REC, F1, MES (floats).

    An empty prediction or gold gives PRE/REC/F1/MES = 0, pSSD = 1, SD = SSD = inf. Warns when the two
    trees' extents differ by more than 10x (likely one in um and one in voxels).
    """
    if tau <= 0 or step <= 0 or ssd_thresh < 0:
        raise ValueError(f"tau and step must be > 0 and ssd_thresh >= 0 (got {tau}, {step}, {ssd_thresh})")
    if len(gold) == 0 or len(pred) == 0:
        return empty_scores()
    eg, ep = _extent(gold.xyz), _extent(pred.xyz)
    if eg > 0 and ep > 0 and max(eg / ep, ep / eg) > 10:
        warnings.warn(f"gold and prediction extents differ by more than 10x ({eg:.1f} vs {ep:.1f}): "
                      "are they in the same units (voxels vs um)?", stacklevel=2)
    dist = (TreeDistance(*_segments(gold, _coords(gold, spacing, physical))),
            TreeDistance(*_segments(pred, _coords(pred, spacing, physical))))
    out = neuron_distance(gold, pred, spacing, ssd_thresh=ssd_thresh, physical=physical, _dist=dist)
    out.update(point_scores(gold, pred, spacing, tau=tau, step=step, physical=physical, _dist=dist))
    return {k: out[k] for k in KEYS}
