"""SwinUNETR (Hatamizadeh et al., BrainLes 2021): shifted-window transformer encoder with a conv decoder;
MONAI's implementation with a small CPU preset. Inputs are padded to a multiple of 32."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from monai.networks.nets import SwinUNETR as _MonaiSwinUNETR
from torch import nn

from neurorefiner.models.segmenters.blocks import check_channels, check_input, crop_to, pad_to_multiple, pick_size

SIZES = {
    "cpu": {"feature_size": 12, "depths": (1, 1, 1, 1), "num_heads": (3, 6, 12, 24), "window_size": 4},
    "paper": {"feature_size": 48, "depths": (2, 2, 2, 2), "num_heads": (3, 6, 12, 24), "window_size": 7},
}


class SwinUNETR(nn.Module):
    arch = "swinunetr"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 feature_size: int | None = None, depths: Sequence[int] | None = None,
                 num_heads: Sequence[int] | None = None, window_size: int | None = None):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        fs = int(feature_size or p["feature_size"])
        if fs % 12:
            raise ValueError(f"SwinUNETR feature_size must be a multiple of 12, got {fs}")
        self.in_channels = in_channels
        self.divisor = (32, 32, 32)
        self.net = _MonaiSwinUNETR(in_channels=in_channels, out_channels=out_channels, feature_size=fs,
                                   depths=tuple(depths or p["depths"]),
                                   num_heads=tuple(num_heads or p["num_heads"]),
                                   window_size=int(window_size or p["window_size"]), spatial_dims=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        if max(x.shape[-3:]) <= 32:  # a 1x1x1 bottleneck breaks instance norm: widen one axis
            x = F.pad(x, (0, 64 - x.shape[-1]))
        return crop_to(self.net(x), size)
