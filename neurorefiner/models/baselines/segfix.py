"""SegFix-style boundary refinement in 3D (idea of Yuan et al., ECCV 2020, written here for volumes).

A network looks at [image; mask] and predicts, per voxel, whether it lies on a label boundary and a unit
direction (z, y, x) that points from it into the interior of the region it belongs to. Refinement touches the
mask's boundary voxels only: each one the network calls a boundary voxel takes the label of the voxel
``step`` voxels along its direction (an interior voxel, whose label the segmenter got right more often).

Training targets come from the gold mask alone (:func:`segfix_targets`): the boundary band is every voxel within
``width`` voxels of a label change, and its direction is the gradient of its own label's distance transform.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from scipy import ndimage as ndi
from torch import nn

from neurorefiner.models.baselines.body import RefinerBody, check_pair


class SegFixNet3D(nn.Module):
    """[image; mask] -> (N, 4, D, H, W): a boundary logit and a direction 3-vector (z, y, x, not normalised).

    Args:
        features: channels per level of the U-Net body, finest first.
        first_stride: the body's first down-sampling.
    """

    out_channels = 4

    def __init__(self, features: Sequence[int] = (8, 16, 32), first_stride: int | Sequence[int] = (1, 2, 2)) -> None:
        super().__init__()
        self.body = RefinerBody(2, features, first_stride)
        self.boundary = nn.Conv3d(self.body.features[0], 1, 1)
        self.direction = nn.Conv3d(self.body.features[0], 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: (N, 2, D, H, W) = [image; mask] (the sliding-window form); see :meth:`predict`."""
        feat, _ = self.body(x)
        return torch.cat([self.boundary(feat), self.direction(feat)], dim=1)

    def predict(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        check_pair(image, mask)
        return self(torch.cat([image, mask], dim=1))


def mask_boundary(mask: np.ndarray) -> np.ndarray:
    """Voxels (both sides) that have a 6-neighbour of the other label: the voxels SegFix may relabel."""
    m = np.asarray(mask, dtype=bool)
    st = ndi.generate_binary_structure(3, 1)
    return (ndi.binary_dilation(m, st) & ~m) | (m & ~ndi.binary_erosion(m, st, border_value=1))


def segfix_targets(gold: np.ndarray, width: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(boundary band bool (D, H, W), unit direction float32 (3, D, H, W)) of a gold mask.

    The band holds the voxels within ``width`` voxels (Euclidean, voxel units) of the other label. A band voxel's
    direction is the gradient of its own label's distance to the other label: it points away from the boundary,
    into the interior of the voxel's own region (towards a neurite's centre line for foreground voxels, away from
    the neurite for background ones), as SegFix derives its directions from the distance transform. Voxels on a
    ridge of that distance (a thin neurite's centre line, which touches the background yet is the most interior
    voxel it has) are left out of the band: they have no more interior voxel to read a label from. Zero outside
    the band."""
    g = np.asarray(gold, dtype=bool)
    if g.ndim != 3:
        raise ValueError(f"gold must be a 3D mask, got shape {g.shape}")
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    direction = np.zeros((3, *g.shape), np.float32)
    band = np.zeros(g.shape, bool)
    if g.all() or not g.any():
        return band, direction
    for own in (g, ~g):
        dist = ndi.distance_transform_edt(own).astype(np.float32)  # to the other label; 0 outside own
        grad = np.stack(np.gradient(dist))
        norm = np.sqrt((grad ** 2).sum(0))
        ridge = dist >= ndi.maximum_filter(dist, size=3)  # a region's most interior voxels (a neurite's centre line)
        ok = own & (dist <= width) & ~ridge & (norm > 1e-6)
        direction[:, ok] = grad[:, ok] / norm[ok]
        band |= ok
    return band, direction


def segfix_relabel(mask: np.ndarray, boundary_prob: np.ndarray, direction: np.ndarray, step: int = 1,
                   threshold: float = 0.5) -> np.ndarray:
    """The mask after SegFix's offset relabelling.

    Every voxel on the mask's boundary (:func:`mask_boundary`) whose ``boundary_prob`` exceeds ``threshold`` takes
    the label the *input* mask has at ``round(voxel + step * unit(direction))`` (clipped to the volume); every
    other voxel keeps its label. ``direction`` is (3, D, H, W) in (z, y, x) voxel units, any length."""
    m = np.asarray(mask, dtype=bool)
    d = np.asarray(direction, dtype=np.float32)
    if m.ndim != 3 or boundary_prob.shape != m.shape or d.shape != (3, *m.shape):
        raise ValueError(f"mask {m.shape}, boundary_prob {boundary_prob.shape} and direction {d.shape} must be "
                         "(D, H, W), (D, H, W) and (3, D, H, W)")
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")
    sel = mask_boundary(m) & (np.asarray(boundary_prob) > threshold)
    out = m.copy()
    if not sel.any():
        return out
    pos = np.argwhere(sel)
    vec = d[:, sel].T
    norm = np.linalg.norm(vec, axis=1, keepdims=True)
    unit = np.where(norm > 1e-6, vec / np.maximum(norm, 1e-6), 0.0)
    dst = np.rint(pos + step * unit).astype(np.int64)
    dst = np.clip(dst, 0, np.array(m.shape) - 1)
    out[tuple(pos.T)] = m[tuple(dst.T)]
    return out
