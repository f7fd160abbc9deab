"""The view a judge that sees the image reads: a small crop around each candidate, on one physical grid.

Three channels, each resampled onto ``CROP_SHAPE`` voxels of ``CROP_SPACING_UM`` micrometres centred on the
candidate, so a crop of DIADEM (0.33 um in xy), of a CWMBS-like stack (0.2 um) and of a BigNeuron-like one
(0.38 um isotropic) show the same physical neighbourhood (about 12 x 14 x 14 um, wider than the 8 um join reach):

0. the image, on the mask's own brightness scale (``(I - background) / (foreground - background)``, the scale
   the hand features use; 0 is the mask's background, 1 its foreground), clipped to ``IMAGE_RANGE``;
1. the mask (linear interpolation: a one-voxel fibre stays visible after resampling);
2. the edit itself: a join's bridge (grown by one voxel), a removal's piece, a prune's branch, so the network
   knows which of the structures in view it is asked about.

Stored as uint8 (0..255 per channel) so a table of tens of thousands of candidates stays small.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.candidates import Candidate

CROP_SHAPE = (12, 24, 24)
CROP_SPACING_UM = (1.0, 0.6, 0.6)
IMAGE_RANGE = (-0.5, 2.5)
CHANNELS = ("image", "mask", "edit")


def candidate_centre(c: Candidate, spacing: Sequence[float], max_from_junction_um: float = 5.0) -> np.ndarray:
    """Where a candidate's crop is centred (voxels, float): a join's gap midpoint, a removal's central voxel,
    a prune's branch near its junction (at most ``max_from_junction_um`` towards the tip: the junction is where
    a spur and a continuing fibre differ)."""
    a = np.asarray(c.anchors, float)
    if c.kind == "join":
        return a.mean(axis=0)
    if c.kind == "remove":
        return a[0]
    tip, junction = a[0], a[1]
    sp = np.asarray(spacing, float)
    d = (tip - junction) * sp
    n = float(np.linalg.norm(d))
    if n <= 2 * max_from_junction_um:
        return (tip + junction) / 2.0
    return junction + d / n * max_from_junction_um / sp


def _grid(centre: np.ndarray, spacing: np.ndarray) -> np.ndarray:
    """Voxel coordinates (3, *CROP_SHAPE) of the crop's sample points."""
    axes = [(np.arange(n) - (n - 1) / 2.0) * s / sp + c
            for n, s, sp, c in zip(CROP_SHAPE, CROP_SPACING_UM, spacing, centre)]
    return np.stack(np.meshgrid(*axes, indexing="ij"))


def _to_u8(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(np.rint((np.asarray(x, np.float32) - lo) / (hi - lo) * 255.0), 0, 255).astype(np.uint8)


def candidate_crops(image: np.ndarray, mask: np.ndarray, candidates: Sequence[Candidate],
                    spacing: Sequence[float], levels: tuple[float, float]) -> np.ndarray:
    """(N, 3, *CROP_SHAPE) uint8 crops of ``candidates`` (image float ZYX, mask bool ZYX, ``levels`` the mask's
    (background, foreground) intensity: :func:`neurorefiner.agents.candidates.intensity_levels`)."""
    from scipy.ndimage import binary_dilation, map_coordinates

    out = np.zeros((len(candidates), len(CHANNELS), *CROP_SHAPE), np.uint8)
    if not len(candidates):
        return out
    sp = np.asarray(spacing, float)
    half = np.ceil(np.asarray(CROP_SHAPE) * np.asarray(CROP_SPACING_UM) / sp / 2.0).astype(int) + 2
    shape = np.asarray(mask.shape)
    bg, fg = levels
    for i, c in enumerate(candidates):
        centre = candidate_centre(c, sp)
        lo = np.clip(np.floor(centre).astype(int) - half, 0, shape)
        hi = np.clip(np.floor(centre).astype(int) + half + 1, 0, shape)
        box = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi))
        if any(b <= a for a, b in zip(lo, hi)):
            continue
        coords = _grid(centre - lo, sp).reshape(3, -1)
        img = (np.asarray(image[box], np.float32) - bg) / max(fg - bg, 1e-3)
        edit = np.zeros(tuple(hi - lo), np.float32)
        vox = np.asarray(c.voxels).reshape(-1, 3) - lo
        vox = vox[np.all((vox >= 0) & (vox < hi - lo), axis=1)]
        if len(vox):
            edit[tuple(vox.T)] = 1.0
            if c.kind == "join":  # a one-voxel path would thin out on a coarser grid: the bridge as a tube
                edit = binary_dilation(edit > 0).astype(np.float32)
        for ch, (vol, rng) in enumerate(((img, IMAGE_RANGE), (mask[box].astype(np.float32), (0.0, 1.0)),
                                         (edit, (0.0, 1.0)))):
            fill = IMAGE_RANGE[0] if ch == 0 else 0.0
            s = map_coordinates(vol, coords, order=1, mode="constant", cval=fill)
            out[i, ch] = _to_u8(s, *rng).reshape(CROP_SHAPE)
    return out


def as_float(crops: np.ndarray) -> np.ndarray:
    """uint8 crops back to float32 in [0, 1] per channel (the network's input)."""
    return np.asarray(crops, np.float32) / 255.0
