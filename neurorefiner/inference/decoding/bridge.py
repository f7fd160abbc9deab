"""One bridge of a join: the cost of a step through the evidence, the cheapest bridge between two groups of
components (``dijkstra3d``), its centre line (straightened where the evidence allows) and the tube painted
along it at the radius of the pieces it joins, when it stays within the length and darkness limits."""

from __future__ import annotations

from collections.abc import Sequence

import dijkstra3d
import numpy as np
from scipy import ndimage as ndi

from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.geometry import grow, straight_line, tube
from neurorefiner.inference.decoding.result import Join

BLOCKED = 1e6  # cost of a voxel a path may not use (outside the search room)


def _backtrack(dist: np.ndarray, target: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """Path from ``target`` down the distance field to a source (distance 0), 26-connected."""
    path = [target]
    cur = target
    shape = dist.shape
    for _ in range(dist.size):
        if dist[cur] <= 0.0:
            break
        lo = [max(0, c - 1) for c in cur]
        hi = [min(s, c + 2) for c, s in zip(cur, shape, strict=True)]
        nb = dist[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
        k = np.unravel_index(int(np.argmin(nb)), nb.shape)
        nxt = (lo[0] + int(k[0]), lo[1] + int(k[1]), lo[2] + int(k[2]))
        if dist[nxt] >= dist[cur]:
            break
        path.append(nxt)
        cur = nxt
    return path


def _centred(point: Sequence[int], comp: np.ndarray, depth: np.ndarray, reach: int = 2) -> tuple[int, ...]:
    """The voxel of ``comp`` within ``reach`` of ``point`` deepest inside the mask (the middle of the
    neurite's cross-section; ties: the nearest to ``point``)."""
    lo = [max(0, int(c) - reach) for c in point]
    hi = [min(n, int(c) + reach + 1) for c, n in zip(point, comp.shape, strict=True)]
    win = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
    cand = np.argwhere(comp[win])
    if len(cand) == 0:
        return tuple(int(c) for c in point)
    d = depth[win][tuple(cand.T)]
    near = -np.abs(cand + np.array(lo) - np.asarray(point)).sum(axis=1)
    best = cand[np.lexsort((near, d))[-1]] + np.array(lo)
    return tuple(int(c) for c in best)


def _axis_radii(mask: np.ndarray, near: np.ndarray) -> tuple[float, float, float]:
    """Half-thickness (voxels, z/y/x) of the mask at ``near``: largest run distance to background along
    each axis, less the centre voxel (0 = one voxel thick). Masks are often anisotropic in voxels."""
    pts = mask & near
    if not pts.any():
        return (0.0, 1.0, 1.0)
    radii = []
    for axis in range(3):
        sampling = [1e3, 1e3, 1e3]
        sampling[axis] = 1.0
        run = ndi.distance_transform_edt(mask, sampling=sampling)
        radii.append(float(max(0.0, min(run[pts].max(), 1e2) - 1.0)))
    return tuple(radii)  # type: ignore[return-value]


def step_cost(ev: np.ndarray, named: np.ndarray, search: np.ndarray, cfg: DecodingConfig) -> np.ndarray:
    """Cost of a bridge's step through each voxel of the room's box: a unit step, plus ``cost_scale`` times
    the darkness (1 - evidence), plus the darkness of the evidence smoothed in y and x (it keeps the path in
    the middle of a bright neurite, whose centre is brighter once blurred, not along its edge; not in z,
    where the neurites of anisotropic stacks are one slice thin and a blur would dim them). Beyond the named
    cell (``named``, grown by ``margin``), where two pieces may pass close by chance, the step costs
    ``outside_cost`` times more; outside the room it is barred."""
    smooth = ndi.gaussian_filter(ev, (0.0, 1.0, 1.0))
    step = (1.0 + cfg.cost_scale * (1.0 - ev) + (1.0 - smooth)).astype(np.float32)
    step[~named] *= cfg.outside_cost
    step[~search] = BLOCKED
    return step


def cheapest_bridge(step: np.ndarray, group_of: np.ndarray, search: np.ndarray, start_groups: set[int],
                    end_groups: set[int], cand_groups: set[int]) -> tuple | None:
    """The cheapest bridge from a start group to another end group: (cost, source group, target voxel,
    distance field, step field), or None when no pair is left."""
    best = None
    for g in sorted(start_groups & cand_groups):
        targets = (end_groups & cand_groups) - {g}
        if not targets:
            continue
        src = group_of == g
        field_ = step.copy()
        field_[src] = 0.0
        sources = [tuple(int(v) for v in p) for p in np.argwhere(src & search)]
        if not sources:
            continue
        dist = dijkstra3d.distance_field(field_, sources, connectivity=26)
        tgt = np.isin(group_of, list(targets)) & search
        if not tgt.any():
            continue
        vals = np.where(tgt, dist, np.inf)
        idx = np.unravel_index(int(np.argmin(vals)), vals.shape)
        if best is None or vals[idx] < best[0]:
            best = (float(vals[idx]), g, idx, dist, field_)
    return best


def bridge_path(out: np.ndarray, ev: np.ndarray, step: np.ndarray, group_of: np.ndarray, g: int,
                idx: tuple[int, ...], dist: np.ndarray, field_: np.ndarray, cfg: DecodingConfig
                ) -> tuple[np.ndarray, tuple[int, ...]]:
    """The bridge's centre line from group ``g`` to voxel ``idx`` (all in the room's box) and its origin.

    The distance field picks the pair of end points; the path between them is traced with euclidean step
    lengths, so it runs straight along the neurite instead of zig-zagging (26-neighbour steps all cost the
    same in the field). A gap is usually a straight stretch of neurite: the straight line between the path's
    ends (taken in the middle of each piece's cross-section) replaces the path when the evidence supports it
    about as well (``line_slack``): the path can drift a slice in z through the blur of an anisotropic stack,
    missing a neurite that is one slice thin."""
    origin = _backtrack(dist, idx)[-1]
    path_pts = dijkstra3d.dijkstra(field_, origin, idx, connectivity=26, anisotropy=(1.0, 1.0, 1.0))
    path = np.zeros(out.shape, dtype=bool)
    path[tuple(np.asarray(path_pts, dtype=np.int64).T)] = True
    # depth in the y-x plane (z counts ten times): neurites one slice thin in z still have a middle
    depth = ndi.distance_transform_edt(out, sampling=(10.0, 1.0, 1.0))
    line = straight_line(_centred(origin, group_of == g, depth),
                         _centred(idx, group_of == int(group_of[idx]), depth), out.shape)
    line_new = line & ~out
    if line_new.any() and (step[line] < BLOCKED).all():
        path_dark = float(np.mean(1.0 - ev[path & ~out])) if (path & ~out).any() else 0.0
        if float(np.mean(1.0 - ev[line_new])) <= max(path_dark + cfg.line_slack, 0.0):
            path = line
    return path, origin


def paint_tube(out: np.ndarray, path: np.ndarray, new: np.ndarray, group_of: np.ndarray, g: int, tg: int,
               origin: tuple[int, ...], idx: tuple[int, ...], search: np.ndarray, join: Join,
               cfg: DecodingConfig) -> None:
    """Paint (in ``out``, the room's box) a tube along the bridge ``new`` at the radius of the pieces it
    joins near its ends (capped by ``max_radius``); along the neurite the run to background is its length,
    not its radius, so that axis takes the largest radius across it."""
    ends_near = grow(path & ~new, 3) & ((group_of == g) | (group_of == tg))
    radii = [min(r, cfg.max_radius) for r in _axis_radii(out, ends_near)]
    along = int(np.argmax(np.abs(np.subtract(idx, origin))))
    radii[along] = max(r for a, r in enumerate(radii) if a != along)
    join.radii = (radii[0], radii[1], radii[2])
    out[(tube(new, tuple(r + cfg.tube_pad for r in join.radii)) & search) | new] = True
    join.painted = True


def over_limits(join: Join, cfg: DecodingConfig) -> bool:
    """Whether a bridge is too long, or too dark for its length (a short gap is painted at any darkness)."""
    return join.length > cfg.max_gap_voxels or (join.darkness > cfg.max_darkness
                                                and join.length > cfg.short_gap_voxels)
