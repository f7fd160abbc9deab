"""Vectorised building blocks of the renderer: tubes painted with an intensity that varies along them,
and smooth random fields (tissue texture, uneven illumination) made separably from a coarse grid.

Both work on whole volumes at once (numba loops over the voxels near each tube; BLAS for the fields),
which keeps a 256^3 stack within a few seconds on two cores.
"""

from __future__ import annotations

import math

import numpy as np

from neurorefiner.io.capsules import paint_capsules


def paint_tree(vol: np.ndarray, zyx_vox: np.ndarray, parent: np.ndarray, radius_vox: np.ndarray,
               intensity: np.ndarray, spacing: tuple[float, float, float]) -> None:
    """Paint a tree given in voxel coordinates (radii in x voxels, at least half a voxel) into ``vol``."""
    if len(parent) == 0:
        return
    sp = np.asarray(spacing, dtype=np.float64)
    pos = np.asarray(zyx_vox, dtype=np.float64) * sp
    r = np.maximum(np.asarray(radius_vox, dtype=np.float64), 0.5) * sp[2]
    inten = np.asarray(intensity, dtype=np.float64)
    child = np.nonzero(parent >= 0)[0]
    has_edge = np.zeros(len(parent), bool)
    has_edge[child] = True
    has_edge[parent[child]] = True
    lone = np.nonzero(~has_edge)[0]
    a = np.concatenate([child, lone])
    b = np.concatenate([parent[child], lone])
    paint_capsules(vol, pos[a], pos[b], r[a], r[b], inten[a], inten[b], sp)


def paint_spheres(vol: np.ndarray, zyx_vox: np.ndarray, radius_vox: np.ndarray, intensity: np.ndarray,
                  spacing: tuple[float, float, float]) -> None:
    """Spheres (physical radius ``radius_vox`` x-voxels) of constant intensity."""
    if len(zyx_vox) == 0:
        return
    sp = np.asarray(spacing, dtype=np.float64)
    pos = np.asarray(zyx_vox, dtype=np.float64) * sp
    r = np.asarray(radius_vox, dtype=np.float64) * sp[2]
    inten = np.asarray(intensity, dtype=np.float64)
    paint_capsules(vol, pos, pos, r, r, inten, inten, sp)


def _weights(n: int, cell: float) -> np.ndarray:
    """(n, knots) Gaussian interpolation weights from knots every ``cell`` voxels, rows of unit L2 norm
    (so an i.i.d. N(0, 1) grid gives a field of unit variance everywhere)."""
    cell = max(float(cell), 1.0)
    knots = np.arange(-2, int(math.ceil((n - 1) / cell)) + 3) * cell
    d = np.arange(n)[:, None] - knots[None, :]
    w = np.exp(-0.5 * (d / (0.7 * cell)) ** 2)
    return (w / np.linalg.norm(w, axis=1, keepdims=True)).astype(np.float32)


def smooth_field(shape: tuple[int, int, int], cell: tuple[float, float, float],
                 rng: np.random.Generator) -> np.ndarray:
    """A smooth random float32 field of zero mean and unit variance, correlated over ``cell`` voxels
    per axis. Separable: three small matrix products instead of a 3D filter of the whole volume."""
    wz, wy, wx = (_weights(n, c) for n, c in zip(shape, cell))
    coarse = rng.standard_normal((wz.shape[1], wy.shape[1], wx.shape[1])).astype(np.float32)
    f = np.tensordot(wz, coarse, axes=(1, 0))  # Z, ky, kx
    f = np.tensordot(f, wy, axes=(1, 1))  # Z, kx, Y
    f = np.tensordot(f, wx, axes=(1, 1))  # Z, Y, X
    return np.ascontiguousarray(f, dtype=np.float32)
