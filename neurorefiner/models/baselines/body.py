"""The small 3D U-Net body the three refinement baselines share: [image; mask (; extra)] in, finest and coarsest
features out. Sizes are CPU sizes (a few tens of thousands of parameters)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from neurorefiner.models.segmenters.blocks import (
    UNetDecoder,
    UNetEncoder,
    as_triple,
    crop_to,
    pad_to_multiple,
    stride_product,
)


class RefinerBody(nn.Module):
    """Encoder-decoder with skips; ``forward`` returns ``(finest, bottleneck)`` features.

    Args:
        in_channels: input channels (image, mask, ...).
        features: channels per level, finest first (>= 2 levels).
        first_stride: the first down-sampling, (1, 2, 2) for anisotropic confocal stacks; later ones are 2.
    """

    def __init__(self, in_channels: int, features: Sequence[int] = (8, 16, 32),
                 first_stride: int | Sequence[int] = (1, 2, 2)) -> None:
        super().__init__()
        if int(in_channels) < 1:
            raise ValueError(f"in_channels must be >= 1, got {in_channels}")
        features = tuple(int(f) for f in features)
        if len(features) < 2 or any(f < 1 for f in features):
            raise ValueError(f"features must list >= 2 positive widths, got {features}")
        strides = [as_triple(first_stride, "first_stride")] + [(2, 2, 2)] * (len(features) - 2)
        self.in_channels = int(in_channels)
        self.features = features
        self.divisor = stride_product(strides)
        self.encoder = UNetEncoder(self.in_channels, features, strides)
        self.decoder = UNetDecoder(features, strides)

    def encode(self, x: torch.Tensor) -> list[torch.Tensor]:
        if x.ndim != 5 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected (N, {self.in_channels}, D, H, W), got {tuple(x.shape)}")
        return self.encoder(x)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, size = pad_to_multiple(x, self.divisor)
        feats = self.encode(x)
        return crop_to(self.decoder(feats), size), feats[-1]


def check_pair(image: torch.Tensor, mask: torch.Tensor) -> None:
    if image.ndim != 5 or image.shape[1] != 1 or image.shape != mask.shape:
        raise ValueError(f"image and mask must both be (N, 1, D, H, W), got {tuple(image.shape)} and "
                         f"{tuple(mask.shape)}")
