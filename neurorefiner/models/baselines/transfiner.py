"""Mask Transfiner-style refinement in 3D (idea of Ke et al., CVPR 2022: refine only the incoherent regions a
quadtree finds, written here for volumes with an octree).

Uncertain voxels (:func:`octree_uncertain`): a cell is *incoherent* when the coarse mask is not constant inside
it (down-sampling the mask to that cell loses information). Level 1 checks cells of ``cell`` voxels; each
incoherent level-1 cell is split into its 8 octants (level 2) and the incoherent octants are kept, together with
their ``neighbours``-cell neighbourhood at level 2 (the context a break's ends and a speck's rim need). A network
reads [image; mask] and re-classifies the uncertain voxels only, from a point-wise head over the finest features,
the coarsest features (up-sampled) and the voxel's own image and mask values; every other voxel keeps its label.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage as ndi
from torch import nn

from neurorefiner.models.baselines.body import RefinerBody, check_pair
from neurorefiner.models.segmenters.blocks import as_triple


class TransfinerNet3D(nn.Module):
    """[image; mask] -> (N, 1, D, H, W) logit of the refined label (used at the uncertain voxels only).

    Args:
        features: channels per level of the U-Net body, finest first.
        first_stride: the body's first down-sampling.
        hidden: width of the point-wise head (1x1x1 convolutions = an MLP per voxel).
        mask_prior: initial weight of the coarse label in the logit: the head predicts a correction of
            ``mask_prior * (2 * mask - 1)`` (learnt), so an untrained head keeps the coarse mask, as Mask Transfiner
            refines the coarse mask's prediction rather than predicting from nothing; 0 = no prior.
    """

    def __init__(self, features: Sequence[int] = (8, 16, 32), first_stride: int | Sequence[int] = (1, 2, 2),
                 hidden: int = 32, mask_prior: float = 0.0) -> None:
        super().__init__()
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        self.mask_prior = nn.Parameter(torch.tensor(float(mask_prior)))
        self.body = RefinerBody(2, features, first_stride)
        width = self.body.features[0] + self.body.features[-1] + 2
        self.head = nn.Sequential(nn.Conv3d(width, hidden, 1), nn.GELU(), nn.Conv3d(hidden, hidden, 1), nn.GELU(),
                                  nn.Conv3d(hidden, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fine, coarse = self.body(x)
        coarse = F.interpolate(coarse, size=fine.shape[2:], mode="trilinear", align_corners=False)
        return self.head(torch.cat([fine, coarse, x], dim=1)) + self.mask_prior * (2 * x[:, 1:2] - 1)

    def predict(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        check_pair(image, mask)
        return self(torch.cat([image, mask], dim=1))


def _incoherent_cells(mask: np.ndarray, cell: tuple[int, int, int]) -> np.ndarray:
    """Per cell of size ``cell`` (the volume padded up to whole cells with the edge values): is the mask mixed?"""
    pads = [(0, (-n) % c) for n, c in zip(mask.shape, cell, strict=True)]
    m = np.pad(mask, pads, mode="edge") if any(p[1] for p in pads) else mask
    g = tuple(n // c for n, c in zip(m.shape, cell, strict=True))
    counts = m.reshape(g[0], cell[0], g[1], cell[1], g[2], cell[2]).sum(axis=(1, 3, 5))
    return (counts > 0) & (counts < cell[0] * cell[1] * cell[2])


def octree_uncertain(mask: np.ndarray, cell: int | Sequence[int] = (2, 8, 8), neighbours: int = 1) -> np.ndarray:
    """Bool (D, H, W): the voxels of the incoherent level-2 octants of incoherent level-1 cells (see the module
    docstring), grown by ``neighbours`` octants. ``cell``: the level-1 cell size (z, y, x), each even or 1 (an axis
    of size 1 is not split)."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 3:
        raise ValueError(f"mask must be 3D, got shape {m.shape}")
    c1 = as_triple(cell, "cell")
    if any(c > 1 and c % 2 for c in c1):
        raise ValueError(f"cell sizes must be even (or 1), got {c1}")
    if neighbours < 0:
        raise ValueError(f"neighbours must be >= 0, got {neighbours}")
    c2 = tuple(max(c // 2, 1) for c in c1)
    ratio = tuple(a // b for a, b in zip(c1, c2, strict=True))
    level1 = _incoherent_cells(m, c1)
    parent = level1
    for axis, r in enumerate(ratio):  # each level-1 cell -> its octants
        parent = np.repeat(parent, r, axis=axis)
    level2 = _incoherent_cells(m, c2)
    sel = level2 & parent[: level2.shape[0], : level2.shape[1], : level2.shape[2]]
    if neighbours and sel.any():
        sel = ndi.binary_dilation(sel, np.ones((3, 3, 3), bool), iterations=int(neighbours))
    out = sel
    for axis, r in enumerate(c2):
        out = np.repeat(out, r, axis=axis)
    return out[: m.shape[0], : m.shape[1], : m.shape[2]]


def transfiner_apply(mask: np.ndarray, prob: np.ndarray, uncertain: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """``mask`` with the ``uncertain`` voxels re-labelled ``prob > threshold``; all others unchanged."""
    m = np.asarray(mask, dtype=bool)
    if prob.shape != m.shape or uncertain.shape != m.shape:
        raise ValueError(f"mask {m.shape}, prob {prob.shape} and uncertain {uncertain.shape} must have one shape")
    return np.where(uncertain, np.asarray(prob) > threshold, m)
