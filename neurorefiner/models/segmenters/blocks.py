"""Building blocks shared by the baseline segmenters (3D conv stacks, size presets, padding).

Every network here maps an (N, C_in, D, H, W) image patch to (N, C_out, D, H, W) logits. Inputs whose
size is not a multiple of the network's total down-sampling are padded and the output cropped back, so
sliding-window inference and odd crop sizes never crash deep inside a conv.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

Triple = tuple[int, int, int]


def as_triple(value: int | Sequence[int], what: str) -> Triple:
    """An int or a 3-sequence of positive ints as a (z, y, x) triple; ValueError otherwise."""
    if isinstance(value, int):
        value = (value, value, value)
    try:
        out = tuple(int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be an int or three ints, got {value!r}") from exc
    if len(out) != 3 or any(v < 1 for v in out):
        raise ValueError(f"{what} must be three positive ints (z, y, x), got {value!r}")
    return out  # type: ignore[return-value]


def check_channels(in_channels: int, out_channels: int) -> None:
    if int(in_channels) < 1 or int(out_channels) < 1:
        raise ValueError(f"in_channels and out_channels must be >= 1, got {in_channels}, {out_channels}")


def pick_size(presets: dict[str, dict[str, Any]], size: str, cls: str) -> dict[str, Any]:
    """The preset named ``size`` ('cpu' default, 'paper' for GPU runs)."""
    if size not in presets:
        raise ValueError(f"{cls}: size must be one of {sorted(presets)}, got {size!r}")
    return dict(presets[size])


def stride_product(strides: Sequence[Triple]) -> Triple:
    out = [1, 1, 1]
    for s in strides:
        for i in range(3):
            out[i] *= s[i]
    return tuple(out)  # type: ignore[return-value]


def pad_to_multiple(x: torch.Tensor, multiple: Triple) -> tuple[torch.Tensor, Triple]:
    """Zero-pad the trailing side of each spatial axis up to a multiple; returns the original size."""
    size = tuple(x.shape[-3:])
    pads = [(-s) % m for s, m in zip(size, multiple, strict=True)]
    if any(pads):
        # F.pad takes (x_lo, x_hi, y_lo, y_hi, z_lo, z_hi)
        x = F.pad(x, (0, pads[2], 0, pads[1], 0, pads[0]))
    return x, size  # type: ignore[return-value]


def crop_to(x: torch.Tensor, size: Triple) -> torch.Tensor:
    return x[..., : size[0], : size[1], : size[2]]


class ConvNormAct(nn.Sequential):
    """Conv3d -> InstanceNorm3d (affine) -> LeakyReLU, the nnU-Net default unit."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int | Triple = 3, stride: int | Triple = 1,
                 dropout: float = 0.0):
        kernel = as_triple(kernel, "kernel")
        pad = tuple(k // 2 for k in kernel)
        layers: list[nn.Module] = [nn.Conv3d(in_ch, out_ch, kernel, stride=stride, padding=pad, bias=False),
                                   nn.InstanceNorm3d(out_ch, affine=True),
                                   nn.LeakyReLU(0.01, inplace=True)]
        if dropout > 0:
            layers.append(nn.Dropout3d(dropout))
        super().__init__(*layers)


class DoubleConv(nn.Sequential):
    """Two ConvNormAct units (the U-Net stage)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int | Triple = 3, dropout: float = 0.0):
        super().__init__(ConvNormAct(in_ch, out_ch, kernel, dropout=dropout),
                         ConvNormAct(out_ch, out_ch, kernel))


class UNetEncoder(nn.Module):
    """Encoder stages of a U-Net: returns the skip features, finest first, bottleneck last."""

    def __init__(self, in_channels: int, features: Sequence[int], strides: Sequence[Triple],
                 dropout: float = 0.0):
        super().__init__()
        if len(strides) != len(features) - 1:
            raise ValueError(f"need one stride per down-sampling ({len(features) - 1}), got {len(strides)}")
        self.stages = nn.ModuleList()
        self.pools = nn.ModuleList()
        prev = in_channels
        for i, f in enumerate(features):
            self.stages.append(DoubleConv(prev, f, dropout=dropout if i == len(features) - 1 else 0.0))
            if i < len(strides):
                self.pools.append(nn.MaxPool3d(kernel_size=strides[i], stride=strides[i]))
            prev = f

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        feats = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            feats.append(x)
            if i < len(self.pools):
                x = self.pools[i](x)
        return feats


class UNetDecoder(nn.Module):
    """Decoder stages: transposed-conv up-sampling, concatenate the skip, two convs. Returns the finest
    feature map (features[0] channels)."""

    def __init__(self, features: Sequence[int], strides: Sequence[Triple]):
        super().__init__()
        self.ups = nn.ModuleList()
        self.stages = nn.ModuleList()
        for i in reversed(range(len(features) - 1)):
            self.ups.append(nn.ConvTranspose3d(features[i + 1], features[i], strides[i], stride=strides[i]))
            self.stages.append(DoubleConv(2 * features[i], features[i]))

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = feats[-1]
        for up, stage, skip in zip(self.ups, self.stages, reversed(feats[:-1]), strict=True):
            x = stage(torch.cat([up(x), skip], dim=1))
        return x


def check_input(x: torch.Tensor, in_channels: int, cls: str) -> None:
    if x.ndim != 5 or x.shape[1] != in_channels:
        raise ValueError(f"{cls} expects (N, {in_channels}, D, H, W), got {tuple(x.shape)}")


def soft_skeleton(mask: torch.Tensor, iterations: int = 5) -> torch.Tensor:
    """Differentiable-style morphological skeleton of a (N, 1, D, H, W) mask in [0, 1] by iterated soft
    erosion/opening (Shit et al., clDice, CVPR 2021); used here to derive centreline targets."""

    def erode(t: torch.Tensor) -> torch.Tensor:
        p1 = -F.max_pool3d(-t, (3, 1, 1), 1, (1, 0, 0))
        p2 = -F.max_pool3d(-t, (1, 3, 1), 1, (0, 1, 0))
        p3 = -F.max_pool3d(-t, (1, 1, 3), 1, (0, 0, 1))
        return torch.min(torch.min(p1, p2), p3)

    def dilate(t: torch.Tensor) -> torch.Tensor:
        return F.max_pool3d(t, 3, 1, 1)

    img = mask.float()
    skel = F.relu(img - dilate(erode(img)))
    for _ in range(iterations):
        img = erode(img)
        delta = F.relu(img - dilate(erode(img)))
        skel = skel + F.relu(delta - skel * delta)
    return skel.clamp(0, 1)


def gaussian_heatmap(skel: torch.Tensor, sigma: float = 1.5) -> torch.Tensor:
    """Skeleton blurred by a separable Gaussian and scaled to max 1 per item (the heat-map target)."""
    r = max(1, int(round(3 * sigma)))
    x = torch.arange(-r, r + 1, dtype=skel.dtype, device=skel.device)
    k = torch.exp(-(x**2) / (2 * sigma**2))
    k = k / k.sum()
    out = skel
    for axis in range(3):
        shape = [1, 1, 1, 1, 1]
        shape[2 + axis] = k.numel()
        pad = [0, 0, 0, 0, 0, 0]
        pad[2 * (2 - axis)] = pad[2 * (2 - axis) + 1] = r
        out = F.conv3d(F.pad(out, pad), k.view(shape))
    peak = out.flatten(1).amax(dim=1).clamp_min(1e-6).view(-1, 1, 1, 1, 1)
    return (out / peak).clamp(0, 1)
