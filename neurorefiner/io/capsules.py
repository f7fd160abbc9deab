"""One compiled kernel that draws tapered tubes ("capsules") into a volume.

Used for both the label masks (``Tree.rasterize``: a uint8 volume, intensity 1) and the synthetic
fluorescence images (``synth.fields.paint_tree``: float intensities, max-composited), so the image and
its label are drawn by exactly the same geometry.
"""

from __future__ import annotations

import math

import numpy as np


def _paint_capsules_py(vol, a, b, ra, rb, ia, ib, sp):  # pragma: no cover - numba compiles this
    """Max-composite capsules a->b (physical Z, Y, X) of radius ra->rb with intensity ia->ib into ``vol``.

    The centreline voxels are always drawn and, between consecutive voxels that differ on more than one
    axis, one axis is stepped at a time: a drawn tree is 6-connected however thin its tubes are.
    """
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
        length = math.sqrt(l2)
        nsteps = int(math.ceil(length / (0.5 * min(sp[0], min(sp[1], sp[2]))))) + 1
        pz_i = int(round(a[e, 0] / sp[0]))
        py_i = int(round(a[e, 1] / sp[1]))
        px_i = int(round(a[e, 2] / sp[2]))
        for s in range(nsteps + 1):
            t = s / nsteps
            v = ia[e] + t * (ib[e] - ia[e])
            iz = int(round((a[e, 0] + t * ab0) / sp[0]))
            iy = int(round((a[e, 1] + t * ab1) / sp[1]))
            ix = int(round((a[e, 2] + t * ab2) / sp[2]))
            while True:
                if 0 <= pz_i < nz and 0 <= py_i < ny and 0 <= px_i < nx and v > vol[pz_i, py_i, px_i]:
                    vol[pz_i, py_i, px_i] = v
                if pz_i != iz:
                    pz_i += 1 if iz > pz_i else -1
                elif py_i != iy:
                    py_i += 1 if iy > py_i else -1
                elif px_i != ix:
                    px_i += 1 if ix > px_i else -1
                else:
                    break


try:
    import numba

    paint_capsules = numba.njit(cache=True, nogil=True)(_paint_capsules_py)
except ImportError:  # pragma: no cover
    paint_capsules = _paint_capsules_py
