"""SegRefiner-style refinement in 3D (idea of Wang et al., NeurIPS 2023: segmentation refinement as a discrete
diffusion between the coarse mask and the fine one, written here for volumes).

The forward process moves voxels from the fine (gold) mask to the coarse one: at step ``t`` of ``T`` each voxel
shows its coarse label with probability ``1 - alpha_t`` and its gold label otherwise, ``alpha_t = 1 - t / T``, so
``x_0`` is the gold mask and ``x_T`` the coarse mask (:func:`corrupt`). A denoiser sees [image; x_t; t] and
predicts the fine mask ``x_0``. The reverse process (:func:`segrefiner_reverse`) starts from the coarse mask and
at each of the ``T`` steps re-assigns, among the voxels not yet fixed, the share
``(alpha_{t-1} - alpha_t) / (1 - alpha_t)`` (= ``1 / t``) whose predicted label is the most confident to that
label; the last step fixes every remaining voxel. ``T = 6`` (the authors' default number of steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from neurorefiner.models.baselines.body import RefinerBody, check_pair
from neurorefiner.models.segmenters.blocks import crop_to, pad_to_multiple


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding (N, dim) of timesteps ``t`` (N,) in [0, 1]."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / max(half, 1))
    args = t.float()[:, None] * 1000.0 * freqs[None]
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=1)
    return torch.nn.functional.pad(emb, (0, dim - emb.shape[1]))


class SegRefinerNet3D(nn.Module):
    """Denoiser: (N, 3, D, H, W) = [image; x_t; t / T as a constant channel] -> (N, 1, D, H, W) logit of x_0.

    The timestep travels as an input channel so the network runs under any sliding-window inferer; it is also read
    back (the channel's maximum, robust to zero padding at the volume border), embedded sinusoidally and added to
    the bottleneck features.

    Args:
        features: channels per level of the U-Net body, finest first.
        first_stride: the body's first down-sampling.
        time_dim: size of the sinusoidal timestep embedding.
    """

    def __init__(self, features: Sequence[int] = (8, 16, 32), first_stride: int | Sequence[int] = (1, 2, 2),
                 time_dim: int = 16) -> None:
        super().__init__()
        if time_dim < 2:
            raise ValueError(f"time_dim must be >= 2, got {time_dim}")
        self.body = RefinerBody(3, features, first_stride)
        self.time_dim = int(time_dim)
        self.time = nn.Sequential(nn.Linear(self.time_dim, self.body.features[-1]), nn.SiLU(),
                                  nn.Linear(self.body.features[-1], self.body.features[-1]))
        self.head = nn.Conv3d(self.body.features[0], 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, size = pad_to_multiple(x, self.body.divisor)
        t = x[:, 2].flatten(1).amax(1)
        feats = self.body.encode(x)
        feats[-1] = feats[-1] + self.time(timestep_embedding(t, self.time_dim))[:, :, None, None, None]
        return crop_to(self.head(self.body.decoder(feats)), size)

    def predict(self, image: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``t``: (N,) timesteps as fractions t / T in [0, 1]."""
        check_pair(image, x_t)
        tc = t.to(image.dtype).view(-1, 1, 1, 1, 1).expand_as(image)
        return self(torch.cat([image, x_t, tc], dim=1))


def alpha(t: int | np.ndarray, steps: int) -> np.ndarray:
    """Share of voxels still in the fine state at step ``t`` (1 at t = 0, 0 at t = steps)."""
    return 1.0 - np.asarray(t, dtype=np.float64) / float(steps)


def corrupt(gold: torch.Tensor, coarse: torch.Tensor, t: torch.Tensor, steps: int,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """x_t of the forward process for a batch: each voxel keeps its gold label with probability alpha_t and shows
    its coarse label otherwise. ``gold``/``coarse`` (N, 1, ...) {0, 1}; ``t`` (N,) integer steps in [0, steps]."""
    if gold.shape != coarse.shape:
        raise ValueError(f"gold {tuple(gold.shape)} and coarse {tuple(coarse.shape)} differ")
    a = torch.as_tensor(alpha(t.cpu().numpy(), steps), dtype=torch.float32, device=gold.device)
    u = torch.rand(gold.shape, generator=generator, device=gold.device)
    keep = u < a.view(-1, *([1] * (gold.ndim - 1)))
    return torch.where(keep, gold, coarse)


def reverse_share(t: int, steps: int) -> float:
    """Share of the not-yet-fixed voxels re-assigned at reverse step ``t`` (steps ... 1)."""
    return float((alpha(t - 1, steps) - alpha(t, steps)) / (1.0 - alpha(t, steps)))


def segrefiner_reverse(predict: Callable[[np.ndarray, int], np.ndarray], coarse: np.ndarray, steps: int = 6,
                       threshold: float = 0.5) -> tuple[np.ndarray, int]:
    """Run the reverse process from ``coarse``: returns (refined bool mask, number of denoiser calls).

    ``predict(x_t, t)`` returns the denoiser's probability of x_0 (same shape as ``coarse``) for the current mask
    ``x_t`` (bool) at integer step ``t``. At step ``t`` the :func:`reverse_share` of the free voxels whose predicted
    label is most confident (``|p - 0.5|``, ties broken by position) take that label and are fixed; step 1 fixes
    every voxel left."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    x = np.asarray(coarse, dtype=bool).copy()
    free = np.ones(x.shape, bool)
    calls = 0
    for t in range(steps, 0, -1):
        p = np.asarray(predict(x, t), dtype=np.float32)
        calls += 1
        if p.shape != x.shape:
            raise ValueError(f"predict returned shape {p.shape}, expected {x.shape}")
        idx = np.flatnonzero(free)
        n = idx.size if t == 1 else int(round(reverse_share(t, steps) * idx.size))
        if n <= 0:
            continue
        conf = np.abs(p.ravel()[idx] - 0.5)
        pick = idx if n >= idx.size else idx[np.argpartition(-conf, n - 1)[:n]]
        x.ravel()[pick] = p.ravel()[pick] > threshold
        free.ravel()[pick] = False
    return x, calls
