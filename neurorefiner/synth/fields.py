"""Vectorised building blocks of the renderer: tubes painted with an intensity that varies along them,
and smooth random fields (tissue texture, uneven illumination) made separably from a coarse grid.

Both work on whole volumes at once (numba loops over the voxels near each tube; BLAS for the fields),
which keeps a 256^3 stack within a few seconds on two cores.
"""

from __future__ import annotations

import math

import numpy as np


def _paint_tubes_py(vol, a, b, ra, rb, ia, ib, sp):  # pragma: no cover - numba compiles this
    """Max-composite tubes a->b (physical Z, Y, X) of radius ra->rb with intensity ia->ib into ``vol``."""
    nz, ny, nx = vol.shape
    dims = (nz, ny, nx)
    lo = np.empty(3, np.int64)
    hi = np.empty(3, np.int64)
    for e in range(a.shape[0]):
        rmax = max(ra[e], rb[e])
        for k in range(3):
            lo[k] = max(0, int(math.floor((min(a[e, k], b[e, k]) - rmax) / sp[k])))
            hi[k] = min(dims[k] - 1, int(math.ceil((max(a[e, k], b[e, k]) + rmax) / sp[k])))
        ab0 = b[e, 0] - a[e, 0]
        ab1 = b[e, 1] - a[e, 1]
        ab2 = b[e, 2] - a[e, 2]
        l2 = ab0 * ab0 + ab1 * ab1 + ab2 * ab2
        for z in range(lo[0], hi[0] + 1):
            pz = z * sp[0] - a[e, 0]
            for y in range(lo[1], hi[1] + 1):
                py = y * sp[1] - a[e, 1]
                for x in range(lo[2], hi[2] + 1):
                    px = x * sp[2] - a[e, 2]
                    t = 0.0
                    if l2 > 0:
                        t = (pz * ab0 + py * ab1 + px * ab2) / l2
                        t = min(1.0, max(0.0, t))
                    dz = pz - t * ab0
                    dy = py - t * ab1
                    dx = px - t * ab2
                    rr = ra[e] + t * (rb[e] - ra[e])
                    if dz * dz + dy * dy + dx * dx <= rr * rr:
                        v = ia[e] + t * (ib[e] - ia[e])
                        if v > vol[z, y, x]:
                            vol[z, y, x] = v
        # the centreline is always painted (as the label's is), so thin tubes stay continuous
        length = math.sqrt(l2)
        nsteps = int(math.ceil(length / (0.5 * min(sp[0], min(sp[1], sp[2]))))) + 1
        for s in range(nsteps + 1):
            t = s / nsteps
            iz = int(round((a[e, 0] + t * ab0) / sp[0]))
            iy = int(round((a[e, 1] + t * ab1) / sp[1]))
            ix = int(round((a[e, 2] + t * ab2) / sp[2]))
            if 0 <= iz < nz and 0 <= iy < ny and 0 <= ix < nx:
                v = ia[e] + t * (ib[e] - ia[e])
                if v > vol[iz, iy, ix]:
                    vol[iz, iy, ix] = v


try:
    import numba

    _paint_tubes = numba.njit(cache=True, nogil=True)(_paint_tubes_py)
except ImportError:  # pragma: no cover
    _paint_tubes = _paint_tubes_py


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
    _paint_tubes(vol, pos[a], pos[b], r[a], r[b], inten[a], inten[b], sp)


def paint_spheres(vol: np.ndarray, zyx_vox: np.ndarray, radius_vox: np.ndarray, intensity: np.ndarray,
                  spacing: tuple[float, float, float]) -> None:
    """Spheres (physical radius ``radius_vox`` x-voxels) of constant intensity."""
    if len(zyx_vox) == 0:
        return
    sp = np.asarray(spacing, dtype=np.float64)
    pos = np.asarray(zyx_vox, dtype=np.float64) * sp
    r = np.asarray(radius_vox, dtype=np.float64) * sp[2]
    inten = np.asarray(intensity, dtype=np.float64)
    _paint_tubes(vol, pos, pos, r, r, inten, inten, sp)


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
