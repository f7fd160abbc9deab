"""3D U-Net (Cicek et al., MICCAI 2016): the paper's main baseline segmenter and the source of the
initial masks NeuroRefiner refines."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from neurorefiner.models.segmenters.blocks import (
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
    # ~0.36 M parameters: trains in minutes on 2 CPU cores, checkpoint ~1.5 MB
    "cpu": {"features": (8, 16, 32, 64)},
    # the original 3D U-Net widths (32 ... 256, three poolings) plus one more level for 128^3 crops
    "paper": {"features": (32, 64, 128, 256, 320)},
}


class UNet3D(nn.Module):
    """Encoder-decoder with skip connections; ``forward`` returns ``out_channels`` logits per voxel.

    Args:
        in_channels: image channels.
        out_channels: classes (2 = background/neurite, trained with softmax Dice + CE).
        size: ``"cpu"`` (default) or ``"paper"`` preset of widths, overridden by ``features``.
        features: channels per level, finest first.
        strides: down-sampling per level (int or (z, y, x)); default ``first_stride`` then 2.
        first_stride: the first down-sampling when ``strides`` is not given; (1, 2, 2) suits anisotropic
            confocal stacks (z spacing ~3x the xy spacing), 2 is the original isotropic U-Net.
        dropout: dropout in the bottleneck.
    """

    arch = "unet3d"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 features: Sequence[int] | None = None, strides: Sequence[int | Sequence[int]] | None = None,
                 first_stride: int | Sequence[int] = 2, dropout: float = 0.0):
        super().__init__()
        check_channels(in_channels, out_channels)
        preset = pick_size(SIZES, size, type(self).__name__)
        features = tuple(int(f) for f in (features if features is not None else preset["features"]))
        if len(features) < 2 or any(f < 1 for f in features):
            raise ValueError(f"features must list >= 2 positive widths, got {features}")
        if strides is None:
            strides = [first_stride] + [2] * (len(features) - 2)
        strides = [as_triple(s, "strides") for s in strides]
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.features = features
        self.strides = strides
        self.divisor = stride_product(strides)
        self.encoder = UNetEncoder(in_channels, features, strides, dropout)
        self.decoder = UNetDecoder(features, strides)
        self.head = nn.Conv3d(features[0], out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        return crop_to(self.head(self.decoder(self.encoder(x))), size)
