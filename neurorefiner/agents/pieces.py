"""Piece geometry every backend reads a mask with (a piece's voxels, shape and ends, the image's levels, joined sets,
a MIP labelled by tile): one module of public names, so no backend imports another's private helpers or copies them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.blocks import Block, label_components


class UnionFind:
    """Disjoint sets of component labels: which pieces a chain of chosen joins has already joined."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, a: int) -> int:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[rb] = ra
        return True


def median_levels(image: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Median background and foreground intensity (on a subsample: this runs every round)."""
    step = max(1, int(round((image.size / 2_000_000) ** (1 / 3))))
    img, msk = image[::step, ::step, ::step], mask[::step, ::step, ::step]
    bg = float(np.median(img[~msk])) if (~msk).any() else 0.0
    fg = float(np.median(img[msk])) if msk.any() else 1.0
    if msk.sum() < 10 and mask.any():
        fg = float(np.median(image[mask]))
    return bg, fg


def intensity_levels(image: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """:func:`median_levels` with the foreground kept above the background: the scale candidates are read on."""
    bg, fg = median_levels(image, mask)
    return bg, max(fg, bg + 1e-3)


def piece_voxels(labels: np.ndarray, box: Sequence[int], c: int) -> np.ndarray:
    """Voxels of piece ``c`` in C order, read in its own bounding box (``cc3d.statistics`` order z0, z1, y0, y1,
    x0, x1, inclusive): a pass over the volume per piece was the detector's cost."""
    z0, z1, y0, y1, x0, x1 = (int(v) for v in box)
    return np.argwhere(labels[z0:z1 + 1, y0:y1 + 1, x0:x1 + 1] == c) + np.array([z0, y0, x0])


def elongation(coords: np.ndarray) -> float:
    """sqrt of the largest over the second principal variance (scaled points: 1 for a ball, large for a tube)."""
    if len(coords) < 3:
        return 1.0
    ev = np.sort(np.linalg.eigvalsh(np.cov(coords.T)))[::-1]
    return float(np.sqrt(ev[0] / max(ev[1], 1e-3)))


def extent_um(coords: np.ndarray) -> float:
    """The span of a piece along its principal axis (physical points): about the length a straight piece adds to
    a trace, which its voxel count confounds with its thickness."""
    if len(coords) < 2:
        return 0.0
    centred = coords - coords.mean(axis=0)
    axis = np.linalg.eigh(np.cov(centred.T))[1][:, -1]
    proj = centred @ axis
    return float(proj.max() - proj.min())


def direction(points: np.ndarray) -> np.ndarray:
    """Unit principal axis of a small point set (zero vector when undefined)."""
    if len(points) < 2:
        return np.zeros(3)
    centred = points - points.mean(axis=0)
    axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    return axis / max(np.linalg.norm(axis), 1e-9)


def _facing_of(local: np.ndarray, p: np.ndarray, towards: np.ndarray, radius: float) -> float:
    offset = local.mean(axis=0) - p
    g = towards - p
    norm_o, norm_g = np.linalg.norm(offset), np.linalg.norm(g)
    if norm_o < 1e-6 or norm_g < 1e-6:
        return 0.0
    return float(np.dot(offset, g) / (norm_o * norm_g)) * min(1.0, norm_o / (0.35 * radius))


def facing(tree, coords: np.ndarray, p: np.ndarray, towards: np.ndarray,  # type: ignore[no-untyped-def]
           radius: float) -> float:
    """Cosine between the gap direction and where the piece's mass within ``radius`` of p lies (``tree``: a KD-tree
    of ``coords``), scaled by how far behind p it is: about -1 at an end facing the gap, about 0 on a tube's side."""
    idx = tree.query_ball_point(p, radius)
    if len(idx) < 2:
        return -1.0  # a lone voxel: all end
    return _facing_of(coords[idx], p, towards, radius)


def end_features(tree, coords: np.ndarray, p: np.ndarray, towards: np.ndarray,  # type: ignore[no-untyped-def]
                 radius: float) -> tuple[float, float]:
    """(facing, alignment) of a piece at ``p`` for a gap towards ``towards``: :func:`facing`, and |cos| between
    the piece's local axis and the gap direction (1: the gap continues the fibre)."""
    idx = tree.query_ball_point(p, radius)
    g = towards - p
    ng = np.linalg.norm(g)
    if len(idx) < 2 or ng < 1e-6:
        return -1.0, 1.0
    local = coords[idx]
    align = float(abs(np.dot(direction(local), g / ng))) if len(idx) >= 3 else 1.0
    return _facing_of(local, p, towards, radius), align


def tile_labels(mip2d: np.ndarray, blocks: Sequence[Block]) -> np.ndarray:
    """Components of a 2D MIP labelled inside each block's tile alone (ids unique across tiles), as 1 x Y x X."""
    out = np.zeros(mip2d.shape, np.uint32)
    offset = 0
    seen: set[tuple[int, int, int, int]] = set()
    for b in blocks:
        key = (b.slices[1].start, b.slices[1].stop, b.slices[2].start, b.slices[2].stop)
        if key in seen:
            continue
        seen.add(key)
        labels, n = label_components(mip2d[None, b.slices[1], b.slices[2]])
        labels = labels[0].astype(np.uint32)
        labels[labels > 0] += offset
        out[b.slices[1], b.slices[2]] = labels
        offset += n
    return out[None]
