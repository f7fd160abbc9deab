"""False-positive defects: extra foreground in a local region (paper, stage 1).

Two kinds, as the paper lists them: the annotation of *another* neuron copied into a local region of
this block (``paste``: realistic tubular false positives, as when a segmenter follows a passing fibre),
and Gaussian noise blobs in a local region (``noise``: speckle and autofluorescent debris).
Only voxels that were background count as the defect; a try that adds too few is redrawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.defects.breaks import Defect
from neurorefiner.defects.describe import DEFAULT_LONG_GAP, describe_change


def _sizes(rng: np.random.Generator, size_range: tuple[int, int], z_scale: float,
           shape: tuple[int, ...]) -> tuple[int, int, int]:
    s = int(rng.integers(int(size_range[0]), int(size_range[1]) + 1))
    sy = int(rng.integers(int(size_range[0]), int(size_range[1]) + 1))
    size = (max(1, int(round(s * z_scale))), sy, s)
    return tuple(min(a, n) for a, n in zip(size, shape, strict=True))  # type: ignore[return-value]


def paste_annotation(gold: np.ndarray, rng: np.random.Generator, sources: Sequence[np.ndarray],
                     size_range: tuple[int, int] = (10, 24), z_scale: float = 0.5, min_voxels: int = 15,
                     max_overlap: float = 0.2, long_gap: float = DEFAULT_LONG_GAP,
                     max_tries: int = 20) -> Defect | None:
    """Copy a local patch of another neuron's mask (one of ``sources``, any shapes) into ``gold``.

    The patch (side drawn from ``size_range`` in y and x, ``z_scale`` times that in z) is centred on a
    random foreground voxel of the source, randomly mirrored in y/x, and placed at a random spot of the
    block where it overlaps the existing foreground by at most ``max_overlap`` of its voxels.
    """
    gold = np.asarray(gold, dtype=bool)
    usable = [s for s in sources if s is not None and np.asarray(s).any()]
    if not usable:
        return None
    for _ in range(max_tries):
        src = np.asarray(usable[rng.integers(len(usable))], dtype=bool)
        size = _sizes(rng, size_range, z_scale, tuple(min(a, b) for a, b in zip(src.shape, gold.shape,
                                                                                 strict=True)))
        fg = np.flatnonzero(src)
        c = np.unravel_index(fg[rng.integers(len(fg))], src.shape)
        lo = [int(np.clip(ci - s // 2, 0, n - s)) for ci, s, n in zip(c, size, src.shape, strict=True)]
        patch = src[tuple(slice(a, a + s) for a, s in zip(lo, size, strict=True))]
        if rng.random() < 0.5:
            patch = patch[:, ::-1]
        if rng.random() < 0.5:
            patch = patch[:, :, ::-1]
        if not patch.any():
            continue
        dst = [int(rng.integers(0, n - s + 1)) for s, n in zip(size, gold.shape, strict=True)]
        box = tuple(slice(a, a + s) for a, s in zip(dst, size, strict=True))
        overlap = int((patch & gold[box]).sum())
        if overlap > max_overlap * patch.sum():
            continue
        out = gold.copy()
        out[box] |= patch
        changed = out & ~gold
        if changed.sum() < min_voxels:
            continue
        return Defect(out, gold.copy(), describe_change(changed, "fp", long_gap), "paste", changed)
    return None


def gaussian_blobs(shape: tuple[int, int, int], centres: np.ndarray, sigmas: np.ndarray,
                   amplitudes: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Boolean mask where a sum of anisotropic Gaussian bumps exceeds ``threshold``.

    ``centres`` (n, 3) ZYX, ``sigmas`` (n, 3) ZYX; evaluated only on the box the bumps cover."""
    out = np.zeros(shape, dtype=bool)
    reach = 3.0 * sigmas
    lo = np.maximum(np.floor((centres - reach).min(axis=0)), 0).astype(int)
    hi = np.minimum(np.ceil((centres + reach).max(axis=0)) + 1, shape).astype(int)
    if np.any(hi <= lo):
        return out
    grids = np.meshgrid(*(np.arange(a, b, dtype=np.float32) for a, b in zip(lo, hi, strict=True)),
                        indexing="ij", sparse=True)
    field = np.zeros(tuple(hi - lo), dtype=np.float32)
    for c, s, a in zip(centres, sigmas, amplitudes, strict=True):
        d2 = sum(((g - ci) / si) ** 2 for g, ci, si in zip(grids, c, s, strict=True))
        field += a * np.exp(-0.5 * d2)
    out[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = field > threshold
    return out


def add_noise_blobs(gold: np.ndarray, rng: np.random.Generator, n_range: tuple[int, int] = (1, 5),
                    sigma_range: tuple[float, float] = (1.0, 2.5), spread: float = 5.0,
                    z_scale: float = 0.5, min_voxels: int = 10, long_gap: float = DEFAULT_LONG_GAP,
                    max_tries: int = 20) -> Defect | None:
    """Add 1-5 Gaussian blobs (sigma in ``sigma_range`` voxels in y/x, ``z_scale`` times that in z)
    scattered by ``spread`` voxels around a random centre of the block."""
    gold = np.asarray(gold, dtype=bool)
    shape = gold.shape
    for _ in range(max_tries):
        n = int(rng.integers(int(n_range[0]), int(n_range[1]) + 1))
        centre = np.array([rng.uniform(0, s) for s in shape])
        scatter = np.array([spread * z_scale, spread, spread])
        centres = centre + rng.normal(0.0, 1.0, (n, 3)) * scatter
        centres = np.clip(centres, 0, np.array(shape) - 1)
        sig = rng.uniform(sigma_range[0], sigma_range[1], (n, 1))
        sigmas = np.concatenate([np.maximum(sig * z_scale, 0.5), sig, sig], axis=1)
        amps = rng.uniform(0.7, 1.5, n)
        blobs = gaussian_blobs(shape, centres, sigmas, amps)
        changed = blobs & ~gold
        if changed.sum() < min_voxels:
            continue
        out = gold | blobs
        return Defect(out, gold.copy(), describe_change(changed, "fp", long_gap), "noise", changed)
    return None
