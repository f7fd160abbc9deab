"""Voxel metrics between binary masks: Dice, clDice and Betti-number errors.

Betti numbers use 26-connectivity for the foreground (6 for the background), the pairing under which
the Euler characteristic of the union of closed voxel cubes is well defined:
b0 = 26-connected foreground components (cc3d), b2 = enclosed cavities (6-connected background
components not touching the padded border), b1 = b0 + b2 - chi, with chi = V - E + F - C counted on
the cubical complex (vectorised, exact).
"""

from __future__ import annotations

import numpy as np


def _bool(a: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 3:
        raise ValueError(f"{name} must be a 3D (Z, Y, X) mask, got shape {a.shape}")
    return a > 0


def _check(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = _bool(a, "first mask"), _bool(b, "second mask")
    if a.shape != b.shape:
        raise ValueError(f"mask shapes differ: {a.shape} vs {b.shape}")
    return a, b


def dice(a: np.ndarray, b: np.ndarray) -> float:
    """2|A n B| / (|A| + |B|); two empty masks agree perfectly (1.0)."""
    a, b = _check(a, b)
    s = int(a.sum()) + int(b.sum())
    return 1.0 if s == 0 else 2.0 * int(np.logical_and(a, b).sum()) / s


def _crop(*masks: np.ndarray) -> tuple[np.ndarray, ...]:
    union = np.logical_or.reduce(masks)
    if not union.any():
        return masks
    idx = np.nonzero(union)
    sl = tuple(slice(max(int(i.min()) - 1, 0), int(i.max()) + 2) for i in idx)
    return tuple(m[sl] for m in masks)


def skeleton(mask: np.ndarray) -> np.ndarray:
    """3D topological skeleton (Lee et al. 1994, scikit-image)."""
    from skimage.morphology import skeletonize

    if not mask.any():
        return np.zeros_like(mask, dtype=bool)
    return skeletonize(mask).astype(bool)


def cldice(pred: np.ndarray, gold: np.ndarray) -> float:
    """Centreline Dice (Shit et al., CVPR 2021): harmonic mean of topology precision |S(P) n G| / |S(P)| and
    topology sensitivity |S(G) n P| / |S(G)|. 0 when either mask is empty (1 when both are)."""
    p, g = _check(pred, gold)
    if not p.any() and not g.any():
        return 1.0
    if not p.any() or not g.any():
        return 0.0
    p, g = _crop(p, g)
    sp, sg = skeleton(p), skeleton(g)
    tprec = np.logical_and(sp, g).sum() / max(int(sp.sum()), 1)
    tsens = np.logical_and(sg, p).sum() / max(int(sg.sum()), 1)
    return 0.0 if tprec + tsens == 0 else float(2 * tprec * tsens / (tprec + tsens))


def euler_characteristic(mask: np.ndarray) -> int:
    """chi of the union of closed unit cubes at the foreground voxels (V - E + F - C)."""
    m = np.pad(_bool(mask, "mask"), 1)
    c = int(m.sum())
    if c == 0:
        return 0
    # a face/edge/vertex exists when any voxel touching it is set: OR over the 2, 4 or 8 neighbours
    fz = m[1:] | m[:-1]
    fy = m[:, 1:] | m[:, :-1]
    fx = m[:, :, 1:] | m[:, :, :-1]
    f = int(fz.sum() + fy.sum() + fx.sum())
    ex = fz[:, 1:] | fz[:, :-1]  # edges along x: touch 4 voxels varying in z and y
    ey = fz[:, :, 1:] | fz[:, :, :-1]
    ez = fy[:, :, 1:] | fy[:, :, :-1]
    e = int(ex.sum() + ey.sum() + ez.sum())
    v = int((ex[:, :, 1:] | ex[:, :, :-1]).sum())
    return v - e + f - c


def betti_numbers(mask: np.ndarray) -> tuple[int, int, int]:
    """(b0, b1, b2) of a 3D binary mask (26-connected foreground)."""
    import cc3d

    m = _bool(mask, "mask")
    if not m.any():
        return 0, 0, 0
    (m,) = _crop(m)
    _, b0 = cc3d.connected_components(m, connectivity=26, return_N=True)
    _, nbg = cc3d.connected_components(~np.pad(m, 1), connectivity=6, return_N=True)
    b2 = int(nbg) - 1
    chi = euler_characteristic(m)
    return int(b0), int(b0 + b2 - chi), b2


def betti_errors(pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Absolute differences of Betti-0 (components) and Betti-1 (loops) between two masks."""
    p, g = _check(pred, gold)
    bp, bg = betti_numbers(p), betti_numbers(g)
    return {"betti0_error": float(abs(bp[0] - bg[0])), "betti1_error": float(abs(bp[1] - bg[1]))}
