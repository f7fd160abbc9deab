"""SGSNet-style segmenter (after SGSNet's structure-guided multi-task idea; written from its description,
not its code): a U-Net whose decoder also predicts a centreline (skeleton) map and a centreline heat map,
and whose segmentation head is guided by both (they are concatenated to the decoder features)."""

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
    gaussian_heatmap,
    pad_to_multiple,
    pick_size,
    soft_skeleton,
    stride_product,
)

SIZES = {"cpu": {"features": (8, 16, 32, 64)}, "paper": {"features": (32, 64, 128, 256, 320)}}


class SGSNetStyle(nn.Module):
    """Args: in/out channels, ``size`` preset, ``features`` per level, ``first_stride`` (then 2),
    ``aux_weight`` of the skeleton + heat-map losses."""

    arch = "sgsnet_style"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 features: Sequence[int] | None = None, first_stride: int | Sequence[int] = (1, 2, 2),
                 aux_weight: float = 0.5):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        features = tuple(int(f) for f in (features or p["features"]))
        if len(features) < 2:
            raise ValueError(f"features must list >= 2 widths, got {features}")
        if aux_weight < 0:
            raise ValueError(f"aux_weight must be >= 0, got {aux_weight}")
        strides = [as_triple(first_stride, "first_stride")] + [(2, 2, 2)] * (len(features) - 2)
        self.in_channels = in_channels
        self.divisor = stride_product(strides)
        self.aux_weight = aux_weight
        self.encoder = UNetEncoder(in_channels, features, strides)
        self.decoder = UNetDecoder(features, strides)
        f0 = features[0]
        self.skeleton_head = nn.Conv3d(f0, 1, 1)
        self.heatmap_head = nn.Conv3d(f0, 1, 1)
        self.guide = ConvNormAct(f0 + 2, f0)
        self.seg_head = nn.Conv3d(f0, out_channels, 1)

    def forward_aux(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        feat = self.decoder(self.encoder(x))
        skel, heat = self.skeleton_head(feat), self.heatmap_head(feat)
        seg = self.seg_head(self.guide(torch.cat([feat, torch.sigmoid(skel), torch.sigmoid(heat)], dim=1)))
        return crop_to(seg, size), {"skeleton": crop_to(skel, size), "heatmap": crop_to(heat, size)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_aux(x)[0]

    def aux_loss(self, aux: dict[str, torch.Tensor], label: torch.Tensor) -> torch.Tensor:
        """BCE on the soft skeleton of the label, MSE on its Gaussian heat map."""
        with torch.no_grad():
            skel = soft_skeleton((label > 0).float())
            heat = gaussian_heatmap(skel)
        pos = skel.mean().clamp_min(1e-4)
        bce = F.binary_cross_entropy_with_logits(aux["skeleton"], skel, pos_weight=(1 - pos) / pos)
        mse = F.mse_loss(torch.sigmoid(aux["heatmap"]), heat)
        return self.aux_weight * (bce + mse)
