"""Channel-wise dot product (CDP, Table 6): the projected instruction multiplies every channel.

``x * (1 + w(t))`` then a residual pointwise convolution; the cheapest of the three fusions.
"""

from __future__ import annotations

import torch
from torch import nn

from neurorefiner.models.fusion._checks import check_args, pooled


class ChannelDotFusion(nn.Module):
    """Args:
    spatial_dims: number of spatial dimensions of ``x``.
    channels: channels C of ``x``.
    context_dim: size d of the text embedding.
    """

    def __init__(self, spatial_dims: int, channels: int, context_dim: int) -> None:
        super().__init__()
        check_args(spatial_dims, channels, context_dim)
        self.spatial_dims, self.channels, self.context_dim = spatial_dims, channels, context_dim
        self.weight = nn.Linear(context_dim, channels)
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[spatial_dims]
        self.proj = nn.Sequential(nn.GELU(), conv(channels, channels, kernel_size=1))

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        if x.ndim != self.spatial_dims + 2 or x.shape[1] != self.channels:
            raise ValueError(f"x must be (B, {self.channels}, *{self.spatial_dims} dims), got {tuple(x.shape)}")
        t = pooled(context.to(x.dtype), x.shape[0], self.context_dim)
        w = self.weight(t).view((x.shape[0], self.channels) + (1,) * self.spatial_dims)
        h = x * (1 + w)
        return h + self.proj(h)
