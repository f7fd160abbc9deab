"""GBP-Net-style segmenter (after GBP-Net's global-context idea; written from its description, not its
code): a high-resolution U-Net path over the patch and a context path over a larger field at lower
resolution, fused at the bottleneck by cross-attention (high-resolution tokens query the context).

``forward(x, context=None)``: ``context`` is a (N, 1, D', H', W') view of a larger field around the patch
(any size; it is resampled to the context grid). Without it, the patch itself at half resolution is the
context (same field), which is what plain sliding-window inference can provide.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from neurorefiner.models.segmenters.blocks import (
    DoubleConv,
    UNetDecoder,
    UNetEncoder,
    as_triple,
    check_channels,
    check_input,
    crop_to,
    pad_to_multiple,
    pick_size,
    stride_product,
)

SIZES = {
    "cpu": {"features": (8, 16, 32, 64), "context_features": (8, 16, 32), "heads": 4, "context_grid": (4, 8, 8)},
    "paper": {"features": (32, 64, 128, 256, 320), "context_features": (16, 32, 64, 128), "heads": 8,
              "context_grid": (8, 16, 16)},
}


class GBPNetStyle(nn.Module):
    arch = "gbpnet_style"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 features: Sequence[int] | None = None, context_features: Sequence[int] | None = None,
                 heads: int | None = None, context_grid: Sequence[int] | None = None,
                 first_stride: int | Sequence[int] = (1, 2, 2)):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        features = tuple(int(f) for f in (features or p["features"]))
        cfeat = tuple(int(f) for f in (context_features or p["context_features"]))
        heads = int(heads or p["heads"])
        if len(features) < 2 or len(cfeat) < 1:
            raise ValueError(f"need >= 2 features and >= 1 context_features, got {features}, {cfeat}")
        if features[-1] % heads:
            raise ValueError(f"bottleneck width {features[-1]} must be divisible by heads {heads}")
        strides = [as_triple(first_stride, "first_stride")] + [(2, 2, 2)] * (len(features) - 2)
        self.in_channels = in_channels
        self.divisor = stride_product(strides)
        self.context_grid = as_triple(tuple(context_grid or p["context_grid"]), "context_grid")
        self.encoder = UNetEncoder(in_channels, features, strides)
        self.decoder = UNetDecoder(features, strides)
        ctx: list[nn.Module] = []
        prev = in_channels
        for f in cfeat:
            ctx += [DoubleConv(prev, f), nn.MaxPool3d(2)]
            prev = f
        self.context_encoder = nn.Sequential(*ctx[:-1])
        self.context_proj = nn.Linear(prev, features[-1])
        self.attn = nn.MultiheadAttention(features[-1], heads, batch_first=True)
        self.norm = nn.LayerNorm(features[-1])
        self.gate = nn.Parameter(torch.zeros(1))  # starts as a plain U-Net, learns how much context to use
        self.head = nn.Conv3d(features[0], out_channels, 1)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        if context is None:
            context = F.avg_pool3d(x, 2, ceil_mode=True)
        x, size = pad_to_multiple(x, self.divisor)
        feats = self.encoder(x)
        c = self.context_encoder(context)
        c = F.adaptive_avg_pool3d(c, self.context_grid).flatten(2).transpose(1, 2)  # N, T_c, C
        c = self.context_proj(c)
        b = feats[-1]
        n, ch, d, h, w = b.shape
        q = b.flatten(2).transpose(1, 2)  # N, T_b, C
        fused, _ = self.attn(self.norm(q), c, c, need_weights=False)
        feats[-1] = b + self.gate * fused.transpose(1, 2).reshape(n, ch, d, h, w)
        return crop_to(self.head(self.decoder(feats)), size)
