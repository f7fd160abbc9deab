"""UNETR (Hatamizadeh et al., WACV 2022): a ViT encoder over 16^3 patches with a convolutional decoder;
MONAI's implementation with a small CPU preset. The ViT needs a fixed input size (``img_size``); smaller
inputs are zero-padded up to it, larger ones are rejected (sliding-window inference uses img_size)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from monai.networks.nets import UNETR as _MonaiUNETR
from torch import nn

from neurorefiner.models.segmenters.blocks import as_triple, check_channels, check_input, crop_to, pick_size

SIZES = {
    "cpu": {"img_size": (32, 96, 96), "feature_size": 8, "hidden_size": 96, "mlp_dim": 192, "num_heads": 4},
    "paper": {"img_size": (64, 128, 128), "feature_size": 16, "hidden_size": 768, "mlp_dim": 3072,
              "num_heads": 12},
}


class UNETR(nn.Module):
    arch = "unetr"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 img_size: Sequence[int] | None = None, feature_size: int | None = None,
                 hidden_size: int | None = None, mlp_dim: int | None = None, num_heads: int | None = None):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        img = as_triple(tuple(img_size) if img_size is not None else p["img_size"], "img_size")
        if any(s % 16 for s in img):
            raise ValueError(f"UNETR img_size must be a multiple of 16 on every axis, got {img}")
        hidden = int(hidden_size or p["hidden_size"])
        heads = int(num_heads or p["num_heads"])
        if hidden % heads:
            raise ValueError(f"hidden_size {hidden} must be divisible by num_heads {heads}")
        self.in_channels = in_channels
        self.img_size = img
        self.max_input_size = img  # read by inference.max_input_of: wider windows would be refused
        self.divisor = (16, 16, 16)
        self.net = _MonaiUNETR(in_channels=in_channels, out_channels=out_channels, img_size=img,
                               feature_size=int(feature_size or p["feature_size"]), hidden_size=hidden,
                               mlp_dim=int(mlp_dim or p["mlp_dim"]), num_heads=heads, norm_name="instance")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        size = tuple(x.shape[-3:])
        if any(s > m for s, m in zip(size, self.img_size, strict=True)):
            raise ValueError(f"UNETR was built for inputs up to {self.img_size}, got {size}; use it through "
                             "sliding-window inference with that patch size")
        pads = [m - s for s, m in zip(size, self.img_size, strict=True)]
        if any(pads):
            x = F.pad(x, (0, pads[2], 0, pads[1], 0, pads[0]))
        return crop_to(self.net(x), size)  # type: ignore[arg-type]
