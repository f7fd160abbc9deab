"""nnU-Net-style segmenter: MONAI ``DynUNet`` configured by nnU-Net's planning rules (Isensee et al.,
Nature Methods 2021).

The real ``nnunetv2`` package resolves beside our torch, but its pipeline (dataset conversion, planning,
a 1000-epoch trainer) is a separate world; this network reproduces what nnU-Net would pick for the
architecture (pooling per axis from patch size and spacing, 3x3x3 vs 1x3x3 kernels on anisotropic axes,
widths doubling from 32 and capped at 320, instance norm + leaky ReLU) and is named "nnU-Net-style".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from monai.networks.nets import DynUNet
from torch import nn

from neurorefiner.models.segmenters.blocks import (
    Triple,
    as_triple,
    check_channels,
    check_input,
    crop_to,
    pad_to_multiple,
    pick_size,
    stride_product,
)

SIZES = {
    "cpu": {"patch_size": (32, 96, 96), "base_features": 8, "max_features": 64},
    "paper": {"patch_size": (64, 128, 128), "base_features": 32, "max_features": 320},
}


def nnunet_plan(patch_size: Sequence[int], spacing: Sequence[float], min_feature_map: int = 4,
                max_stages: int = 6) -> tuple[list[Triple], list[Triple]]:
    """Kernels and strides per stage, following nnU-Net's ``get_pool_and_conv_props``:

    * an axis is pooled while its feature map stays >= 2 * ``min_feature_map`` and its current spacing is
      at most twice the finest current spacing (so anisotropic z is pooled only once xy has caught up);
    * a conv kernel is 1 along an axis whose spacing is still over twice the finest (no 3-wide kernels
      across thick slices), 3 otherwise.
    """
    size = [int(s) for s in as_triple(tuple(patch_size), "patch_size")]
    sp = [float(s) for s in spacing]
    if len(sp) != 3 or any(s <= 0 for s in sp):
        raise ValueError(f"spacing must be three positive numbers, got {spacing!r}")
    kernels: list[Triple] = []
    strides: list[Triple] = [(1, 1, 1)]
    kernels.append(tuple(3 if s <= 2 * min(sp) else 1 for s in sp))  # type: ignore[arg-type]
    while len(strides) < max_stages:
        finest = min(sp)
        pool = [1 if (s > 2 * finest or n < 2 * min_feature_map) else 2 for s, n in zip(sp, size, strict=True)]
        if all(p == 1 for p in pool):
            break
        size = [n // p for n, p in zip(size, pool, strict=True)]
        sp = [s * p for s, p in zip(sp, pool, strict=True)]
        strides.append(tuple(pool))  # type: ignore[arg-type]
        finest = min(sp)
        kernels.append(tuple(3 if s <= 2 * finest else 1 for s in sp))  # type: ignore[arg-type]
    return kernels, strides


class NNUNetStyle(nn.Module):
    """DynUNet with nnU-Net's planned topology for a patch size and voxel spacing.

    Args:
        in_channels, out_channels: image channels and classes.
        size: ``"cpu"`` (default) or ``"paper"`` preset (patch size and widths).
        patch_size: training patch (z, y, x) the plan is made for.
        spacing: voxel spacing (z, y, x) in um; default DIADEM's (1.0, 0.33, 0.33).
        base_features, max_features: widths of the first stage and the cap (nnU-Net: 32 and 320).
    """

    arch = "nnunet_style"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 patch_size: Sequence[int] | None = None, spacing: Sequence[float] = (1.0, 0.33, 0.33),
                 base_features: int | None = None, max_features: int | None = None):
        super().__init__()
        check_channels(in_channels, out_channels)
        preset = pick_size(SIZES, size, type(self).__name__)
        patch = as_triple(tuple(patch_size) if patch_size is not None else preset["patch_size"], "patch_size")
        base = int(base_features or preset["base_features"])
        cap = int(max_features or preset["max_features"])
        if base < 1 or cap < base:
            raise ValueError(f"need 1 <= base_features <= max_features, got {base}, {cap}")
        kernels, strides = nnunet_plan(patch, spacing)
        if len(strides) < 2:
            raise ValueError(f"patch_size {patch} is too small to down-sample even once")
        filters = [min(base * 2**i, cap) for i in range(len(strides))]
        self.in_channels = in_channels
        self.kernels, self.strides, self.filters = kernels, strides, filters
        self.divisor = stride_product(strides)
        self.net = DynUNet(spatial_dims=3, in_channels=in_channels, out_channels=out_channels,
                           kernel_size=kernels, strides=strides, upsample_kernel_size=strides[1:],
                           filters=filters, norm_name=("INSTANCE", {"affine": True}),
                           act_name=("leakyrelu", {"inplace": True, "negative_slope": 0.01}),
                           deep_supervision=False, res_block=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        return crop_to(self.net(x), size)
