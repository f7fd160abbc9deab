"""ADTL-Net-style segmenter (after ADTL-Net's adaptive dual-task learning; written from its description,
not its code): one encoder, two decoders (segmentation and centreline), the centreline decoder's features
feeding the segmentation head, and the two task losses balanced adaptively by learned uncertainty
weights (Kendall et al., CVPR 2018) instead of a fixed ratio."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from neurorefiner.models.segmenters.blocks import (
    ConvNormAct,
    UNetDecoder,
    UNetEncoder,
    as_triple,
    check_channels,
    check_input,
    crop_to,
    pad_to_multiple,
    pick_size,
    soft_skeleton,
    stride_product,
)

SIZES = {"cpu": {"features": (8, 16, 32, 64)}, "paper": {"features": (32, 64, 128, 256, 320)}}


class ADTLNetStyle(nn.Module):
    arch = "adtlnet_style"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 features: Sequence[int] | None = None, first_stride: int | Sequence[int] = (1, 2, 2)):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        features = tuple(int(f) for f in (features or p["features"]))
        if len(features) < 2:
            raise ValueError(f"features must list >= 2 widths, got {features}")
        strides = [as_triple(first_stride, "first_stride")] + [(2, 2, 2)] * (len(features) - 2)
        self.in_channels = in_channels
        self.divisor = stride_product(strides)
        self.encoder = UNetEncoder(in_channels, features, strides)
        self.seg_decoder = UNetDecoder(features, strides)
        self.line_decoder = UNetDecoder(features, strides)
        f0 = features[0]
        self.fuse = ConvNormAct(2 * f0, f0)
        self.seg_head = nn.Conv3d(f0, out_channels, 1)
        self.line_head = nn.Conv3d(f0, 1, 1)
        # log variances of the two tasks (adaptive weights), learned with the network
        self.log_vars = nn.Parameter(torch.zeros(2))

    def forward_aux(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        feats = self.encoder(x)
        seg_f, line_f = self.seg_decoder(feats), self.line_decoder(feats)
        seg = self.seg_head(self.fuse(torch.cat([seg_f, line_f], dim=1)))
        return crop_to(seg, size), {"centreline": crop_to(self.line_head(line_f), size)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_aux(x)[0]

    def aux_loss(self, aux: dict[str, torch.Tensor], label: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            skel = soft_skeleton((label > 0).float())
        pos = skel.mean().clamp_min(1e-4)
        return F.binary_cross_entropy_with_logits(aux["centreline"], skel, pos_weight=(1 - pos) / pos)

    def combine_losses(self, seg_loss: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
        """exp(-s_i) L_i + s_i per task: a task whose loss stays noisy gets down-weighted."""
        s = self.log_vars
        return torch.exp(-s[0]) * seg_loss + s[0] + torch.exp(-s[1]) * aux_loss + s[1]
