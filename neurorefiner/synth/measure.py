"""Measurements on a stack and its gold tree, the same for synthetic and real data.

They check what the generator claims (weak-signal stretches that invite breaks, distractors that
invite false positives) from the pixels, not from the parameters, and feed the realism report that
compares the presets with the real DIADEM stacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.io.swc import Tree

Spacing = tuple[float, float, float]


def near_label(label: np.ndarray, spacing: Spacing, margin_um: float | None = None) -> np.ndarray:
    """The label grown by ``margin_um`` (default: 3 x-voxels) in physical units: what counts as 'the target'."""
    sz, _, sx = spacing
    m = 3 * sx if margin_um is None else margin_um
    rz = int(round(m / sz))
    rxy = int(round(m / sx))
    return ndi.maximum_filter(label.astype(np.uint8), size=(2 * rz + 1, 2 * rxy + 1, 2 * rxy + 1)).astype(bool)


def denoised(image: np.ndarray, spacing: Spacing) -> np.ndarray:
    """A light Gaussian blur (0.7 x-voxel in xy, the same um in z, at least 0.3 slice)."""
    sz, _, sx = spacing
    return ndi.gaussian_filter(image.astype(np.float32), (max(0.7 * sx / sz, 0.3), 0.7, 0.7))


def centreline(tree: Tree, spacing: Spacing) -> Tree:
    """The tree resampled every x-voxel (physical step = x spacing), in voxel coordinates."""
    return tree.resampled(spacing[2], spacing).reindexed()


def _local_background(image: np.ndarray, background: np.ndarray, size: tuple[int, int, int]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the background voxels in a box around every voxel."""
    img = image.astype(np.float32)
    w = background.astype(np.float32)
    cnt = ndi.uniform_filter(w, size)
    s1 = ndi.uniform_filter(img * w, size)
    s2 = ndi.uniform_filter(img * img * w, size)
    cnt = np.maximum(cnt, 1e-6)
    mean = s1 / cnt
    var = np.maximum(s2 / cnt - mean * mean, 0.0)
    return mean, np.sqrt(var)


@dataclass
class SnrProfile:
    tree: Tree  # the centreline (one node per x-voxel)
    snr: np.ndarray  # local SNR at each node
    signal: np.ndarray  # denoised intensity at the node
    bg_mean: np.ndarray
    bg_sd: np.ndarray


def snr_along_tree(image: np.ndarray, label: np.ndarray, tree: Tree, spacing: Spacing,
                   window_um: float = 8.0, min_sd: float = 1.0) -> SnrProfile:
    """Local SNR along the gold centreline: (intensity at the node - local background mean) / local sd,
    all on the lightly denoised stack (:func:`denoised`, what any segmenter effectively sees).

    The background is every voxel of a box of ``window_um`` (at least 3 slices) outside the grown label;
    ``min_sd`` (one grey level) keeps zero-noise backgrounds (DIADEM) finite.
    """
    sz, _, sx = spacing
    cl = centreline(tree, spacing)
    bg = ~near_label(label, spacing)
    size = (max(3, int(round(window_um / sz)) | 1), int(round(window_um / sx)) | 1, int(round(window_um / sx)) | 1)
    smooth = denoised(image, spacing)
    mean, sd = _local_background(smooth, bg, size)
    idx = np.clip(np.rint(cl.zyx).astype(np.int64), 0, np.asarray(image.shape) - 1)
    z, y, x = idx.T
    sig = smooth[z, y, x].astype(np.float64)
    m = mean[z, y, x].astype(np.float64)
    s = np.maximum(sd[z, y, x].astype(np.float64), min_sd)
    return SnrProfile(cl, (sig - m) / s, sig, m, s)


def weak_runs(profile: SnrProfile, spacing: Spacing, threshold: float = 2.0) -> np.ndarray:
    """Lengths (x voxels) of connected stretches of the centreline whose local SNR is below ``threshold``.

    A stretch this dim is where a threshold or a segmenter breaks the neurite.
    """
    tree = profile.tree
    if len(tree) == 0:
        return np.zeros(0)
    weak = profile.snr < threshold
    pi = tree.parent_index
    pos = tree.physical_zyx(spacing) / spacing[2]
    comp = np.arange(len(tree))
    seg = np.zeros(len(tree))
    for i in range(len(tree)):  # reindexed: parents first
        p = pi[i]
        if p >= 0 and weak[i] and weak[p]:
            comp[i] = comp[p]
            seg[i] = float(np.linalg.norm(pos[i] - pos[p]))
    lengths = np.bincount(comp[weak], weights=seg[weak], minlength=len(tree))
    roots = np.unique(comp[weak])
    return lengths[roots]


def distractor_stats(image: np.ndarray, label: np.ndarray, profile: SnrProfile, spacing: Spacing
                     ) -> dict[str, float]:
    """How much bright structure is *not* the target.

    Bright = above the median brightness of the target's centreline (after a light denoising blur),
    the level a segmenter must accept to keep the target. Reports the fraction of bright voxels that
    lie away from the target and the number of such bright connected components.
    """
    import cc3d

    smooth = denoised(image, spacing)
    idx = np.clip(np.rint(profile.tree.zyx).astype(np.int64), 0, np.asarray(image.shape) - 1)
    target_level = float(np.median(smooth[idx[:, 0], idx[:, 1], idx[:, 2]])) if len(idx) else float("inf")
    bright = smooth > target_level
    away = bright & ~near_label(label, spacing)
    n_bright = int(bright.sum())
    comps = cc3d.connected_components(away.astype(np.uint8), connectivity=26)
    sizes = np.bincount(comps.ravel())[1:] if comps.max() > 0 else np.zeros(0)
    return {
        "target_level": target_level,
        "bright_voxels": float(n_bright),
        "bright_away_fraction": float(away.sum() / n_bright) if n_bright else 0.0,
        "away_components": float((sizes >= 4).sum()),  # ignore single noise voxels
    }


def morphology_stats(tree: Tree, spacing: Spacing) -> dict[str, np.ndarray]:
    """Radii (um), branch order per segment and segment lengths (um) between branch points/tips."""
    if len(tree) == 0:
        return {"radius_um": np.zeros(0), "branch_order": np.zeros(0), "segment_um": np.zeros(0)}
    t = tree.reindexed()
    pi = t.parent_index
    nch = t.n_children()
    pos = t.physical_zyx(spacing)
    order = np.zeros(len(t), np.int64)
    segid = np.arange(len(t))
    edge = np.zeros(len(t))
    for i in range(len(t)):
        p = pi[i]
        if p < 0:
            continue
        edge[i] = float(np.linalg.norm(pos[i] - pos[p]))
        order[i] = order[p] + (1 if nch[p] >= 2 else 0)
        if nch[p] == 1 and pi[p] >= 0:
            segid[i] = segid[p]
    has_parent = pi >= 0
    ids = segid[has_parent]
    lengths = np.bincount(ids, weights=edge[has_parent], minlength=len(t))
    firsts = np.unique(ids)
    return {"radius_um": t.radius * spacing[2], "branch_order": order[firsts].astype(float),
            "segment_um": lengths[firsts]}


def normalised_background(image: np.ndarray, label: np.ndarray, spacing: Spacing, n: int = 200_000,
                          seed: int = 0) -> np.ndarray:
    """A sample of background intensities mapped so the stack's 0.1th percentile is 0 and its 99.9th is 1
    (free of bit depth and camera offset)."""
    bg = ~near_label(label, spacing)
    lo, hi = (float(v) for v in np.percentile(image, [0.1, 99.9]))
    vals = (image[bg].astype(np.float32) - lo) / max(hi - lo, 1.0)
    if len(vals) > n:
        vals = np.random.default_rng(seed).choice(vals, n, replace=False)
    return vals
