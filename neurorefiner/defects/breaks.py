"""False-negative defects: cut a break into a correct mask (paper, stage 1).

A random foreground voxel is the centre; inside a cube of side k (k drawn from [5, 20]) around it the
mask is replaced by its erosion with a k-sized cubic kernel. Thin neurites (radius well under k/2)
vanish there, so the neurite is cut; thick parts (a soma) only shrink. A cut is kept only when it
really breaks the structure: the number of components of at least ``min_piece`` voxels must go up,
otherwise another centre and kernel are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from neurorefiner.defects.describe import DEFAULT_LONG_GAP, betti0, describe_change
from neurorefiner.topology.instructions import Instruction


@dataclass
class Defect:
    """A defective mask, the mask it should be corrected to, and the instruction that asks for it."""

    mask: np.ndarray  # defective (input) mask, bool (D, H, W)
    target: np.ndarray  # corrected mask, bool (D, H, W)
    instruction: Instruction
    kind: str  # "break", "paste", "noise" or "touch"
    changed: np.ndarray  # voxels where mask and target differ, bool (D, H, W)


def _box(centre: np.ndarray, size: tuple[int, int, int], shape: tuple[int, ...]) -> tuple[slice, ...]:
    lo = [max(0, int(c) - s // 2) for c, s in zip(centre, size, strict=True)]
    return tuple(slice(a, min(n, a + s)) for a, s, n in zip(lo, size, shape, strict=True))


def cut_break(mask: np.ndarray, centre: np.ndarray, k: int, kz: int | None = None) -> np.ndarray:
    """``mask`` with the cube of side k (kz along z) around ``centre`` replaced by the mask's erosion
    with a k x k x kz kernel. The erosion is computed on the cube plus a margin, not the whole mask."""
    kz = k if kz is None else kz
    size = (kz, k, k)
    box = _box(centre, size, mask.shape)
    ext = tuple(slice(max(0, b.start - s // 2 - 1), min(n, b.stop + s // 2 + 1))
                for b, s, n in zip(box, size, mask.shape, strict=True))
    sub = mask[ext].astype(np.uint8)
    # outside the block counts as foreground, so the block edge itself does not erode anything
    eroded = ndimage.minimum_filter(sub, size=size, mode="constant", cval=1).astype(bool)
    inner = tuple(slice(b.start - e.start, b.stop - e.start) for b, e in zip(box, ext, strict=True))
    out = mask.copy()
    out[box] = eroded[inner]
    return out


def make_break(gold: np.ndarray, rng: np.random.Generator, k_range: tuple[int, int] = (5, 20),
               z_scale: float = 1.0, min_piece: int = 8, long_gap: float = DEFAULT_LONG_GAP,
               max_tries: int = 20, fg: np.ndarray | None = None) -> Defect | None:
    """Cut one break into ``gold`` (bool (D, H, W)); None when no try broke anything.

    ``k_range`` is inclusive (the paper's [5, 20]); the kernel is ``k`` voxels in y and x and
    ``round(k * z_scale)`` in z (1.0 = as the paper, in voxels). ``fg`` may pass the foreground
    coordinates (N, 3) when already known.
    """
    k_lo, k_hi = int(k_range[0]), int(k_range[1])
    if not 1 <= k_lo <= k_hi:
        raise ValueError(f"k_range must be 1 <= low <= high, got {k_range}")
    gold = np.asarray(gold, dtype=bool)
    if fg is None:
        fg = np.argwhere(gold)
    if len(fg) == 0:
        return None
    before = betti0(gold, min_piece)
    for _ in range(max_tries):
        centre = fg[rng.integers(len(fg))]
        k = int(rng.integers(k_lo, k_hi + 1))
        kz = max(1, int(round(k * z_scale)))
        cut = cut_break(gold, centre, k, kz)
        changed = gold & ~cut
        if not changed.any() or betti0(cut, min_piece) <= before:
            continue
        return Defect(cut, gold.copy(), describe_change(changed, "fn", long_gap), "break", changed)
    return None


def dim_gap(image: np.ndarray, gold: np.ndarray, gap: np.ndarray, contrast: float, halo: int = 1) -> np.ndarray:
    """``image`` with the neurite faint across a break: inside ``gap`` (the cut's voxels) grown by ``halo``
    voxels, kept structure (``gold`` outside the gap) excepted, the image's contrast over the background (the
    median of the non-gold voxels) is scaled by ``contrast`` (0 = as dark as the background, 1 = unchanged).

    Why: a break cut into a gold mask leaves the image as bright in the gap as along the neurite (contrast
    ratio ~1.0 on the probe's synthetic breaks), while a segmenter breaks a neurite where it is faint (0.16 of
    the kept neurite's contrast on DIADEM OP_6, 0.47 on the stand-ins' SYNTHETIC stacks). A network that
    only ever saw bright gaps does not bridge faint ones."""
    if not 0.0 <= contrast <= 1.0:
        raise ValueError(f"contrast must be in [0, 1], got {contrast}")
    image = np.asarray(image, dtype=np.float32)
    gold, gap = np.asarray(gold, dtype=bool), np.asarray(gap, dtype=bool)
    if not gap.any():
        return image.copy()
    background = float(np.median(image[~gold])) if (~gold).any() else 0.0
    where = (ndimage.binary_dilation(gap, iterations=int(halo)) if halo > 0 else gap) & ~(gold & ~gap)
    out = image.copy()
    out[where] = background + contrast * (image[where] - background)
    return out
