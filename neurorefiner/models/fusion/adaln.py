"""Adaptive normalisation (AdaLN, Table 6): the instruction sets a per-channel scale, shift and gate.

``x + gate(t) * conv(act(norm(x) * (1 + scale(t)) + shift(t)))``. The modulation is the same at every
location, so any spatial selectivity has to come from position-aware features the decoder sees; that is
the trade-off the ablation measures.
"""

from __future__ import annotations

import torch
from torch import nn

from neurorefiner.models.fusion._checks import check_args, pooled


class AdaLNFusion(nn.Module):
    """Args:
    spatial_dims: number of spatial dimensions of ``x``.
    channels: channels C of ``x``.
    context_dim: size d of the text embedding.
    """

    def __init__(self, spatial_dims: int, channels: int, context_dim: int) -> None:
        super().__init__()
        check_args(spatial_dims, channels, context_dim)
        self.spatial_dims, self.channels, self.context_dim = spatial_dims, channels, context_dim
        self.norm = nn.GroupNorm(1, channels, affine=False)
        self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(context_dim, 3 * channels))
        nn.init.zeros_(self.modulation[1].weight)
        nn.init.zeros_(self.modulation[1].bias)
        with torch.no_grad():  # start with gate 1 so the text path trains from step one
            self.modulation[1].bias[2 * channels:] = 1.0
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[spatial_dims]
        self.act = nn.GELU()
        self.proj = conv(channels, channels, kernel_size=1)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        if x.ndim != self.spatial_dims + 2 or x.shape[1] != self.channels:
            raise ValueError(f"x must be (B, {self.channels}, *{self.spatial_dims} dims), got {tuple(x.shape)}")
        t = pooled(context.to(x.dtype), x.shape[0], self.context_dim)
        scale, shift, gate = self.modulation(t).chunk(3, dim=1)
        view = (x.shape[0], self.channels) + (1,) * self.spatial_dims
        h = self.norm(x) * (1 + scale.view(view)) + shift.view(view)
        return x + gate.view(view) * self.proj(self.act(h))
