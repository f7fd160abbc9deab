"""V-Net (Milletari et al., 3DV 2016): residual stages of 5x5x5 convolutions, strided-conv down-sampling,
PReLU. Written here (MONAI's VNet has fixed widths) so the CPU size can be small."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from neurorefiner.models.segmenters.blocks import check_channels, check_input, crop_to, pad_to_multiple, pick_size

SIZES = {
    "cpu": {"base_features": 8, "kernel": 3, "convs": (1, 2, 2, 2)},
    "paper": {"base_features": 16, "kernel": 5, "convs": (1, 2, 3, 3, 3)},
}


class _ResStage(nn.Module):
    """n conv-norm-PReLU units with a residual connection from the stage input."""

    def __init__(self, ch: int, n: int, kernel: int):
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(n):
            layers += [nn.Conv3d(ch, ch, kernel, padding=kernel // 2), nn.InstanceNorm3d(ch, affine=True)]
            if i < n - 1:
                layers.append(nn.PReLU(ch))
        self.body = nn.Sequential(*layers)
        self.act = nn.PReLU(ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.body(x) + x)


class VNet(nn.Module):
    """Args: in/out channels; ``size`` preset; ``base_features`` width of the first stage (doubles per
    level); ``kernel`` conv size (paper: 5); ``convs`` residual convs per encoder level."""

    arch = "vnet"

    def __init__(self, in_channels: int = 1, out_channels: int = 2, size: str = "cpu",
                 base_features: int | None = None, kernel: int | None = None,
                 convs: Sequence[int] | None = None):
        super().__init__()
        check_channels(in_channels, out_channels)
        p = pick_size(SIZES, size, type(self).__name__)
        base = int(base_features or p["base_features"])
        kernel = int(kernel or p["kernel"])
        convs = tuple(int(c) for c in (convs or p["convs"]))
        if base < 1 or kernel < 1 or kernel % 2 == 0 or len(convs) < 2 or min(convs) < 1:
            raise ValueError(f"bad VNet settings: base_features={base}, kernel={kernel} (odd), convs={convs}")
        self.in_channels = in_channels
        levels = len(convs)
        self.divisor = (2 ** (levels - 1),) * 3
        widths = [base * 2**i for i in range(levels)]
        self.stem = nn.Sequential(nn.Conv3d(in_channels, base, kernel, padding=kernel // 2),
                                  nn.InstanceNorm3d(base, affine=True), nn.PReLU(base))
        self.enc = nn.ModuleList([_ResStage(w, n, kernel) for w, n in zip(widths, convs, strict=True)])
        self.down = nn.ModuleList([nn.Sequential(nn.Conv3d(widths[i], widths[i + 1], 2, stride=2),
                                                 nn.InstanceNorm3d(widths[i + 1], affine=True),
                                                 nn.PReLU(widths[i + 1])) for i in range(levels - 1)])
        self.up = nn.ModuleList()
        self.fuse = nn.ModuleList()
        self.dec = nn.ModuleList()
        for i in reversed(range(levels - 1)):
            self.up.append(nn.ConvTranspose3d(widths[i + 1], widths[i], 2, stride=2))
            self.fuse.append(nn.Conv3d(2 * widths[i], widths[i], 1))
            self.dec.append(_ResStage(widths[i], convs[i + 1] if i + 1 < levels else 1, kernel))
        self.head = nn.Conv3d(base, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input(x, self.in_channels, type(self).__name__)
        x, size = pad_to_multiple(x, self.divisor)
        x = self.stem(x)
        skips = []
        for i, stage in enumerate(self.enc):
            x = stage(x)
            if i < len(self.down):
                skips.append(x)
                x = self.down[i](x)
        for up, fuse, dec, skip in zip(self.up, self.fuse, self.dec, reversed(skips), strict=True):
            x = dec(fuse(torch.cat([up(x), skip], dim=1)))
        return crop_to(self.head(x), size)
