"""Baseline segmenters: shapes for odd inputs, presets, bad arguments, nnU-Net planning rules."""

from __future__ import annotations

import pytest
import torch

from neurorefiner.models.segmenters import available, build_segmenter
from neurorefiner.models.segmenters.nnunet_style import nnunet_plan

SMALL = {  # arch -> (constructor kwargs for a quick test, input shape)
    "unet3d": ({"first_stride": (1, 2, 2)}, (13, 30, 27)),
    "nnunet_style": ({"patch_size": (16, 32, 32)}, (13, 30, 27)),
    "vnet": ({}, (13, 30, 27)),
    "unetr": ({"img_size": (16, 32, 32)}, (13, 30, 27)),
    "swinunetr": ({}, (13, 30, 27)),
    "sgsnet_style": ({}, (13, 30, 27)),
    "adtlnet_style": ({}, (13, 30, 27)),
    "gbpnet_style": ({}, (13, 30, 27)),
}



@pytest.mark.parametrize("arch", available())
def test_forward_keeps_shape_for_odd_input(arch):
    kwargs, shape = SMALL[arch]
    torch.manual_seed(0)
    net = build_segmenter(arch, **kwargs).eval()
    with torch.no_grad():
        y = net(torch.rand(2, 1, *shape))
    assert y.shape == (2, 2, *shape)
    assert torch.isfinite(y).all()
    assert net.arch == arch


@pytest.mark.parametrize("arch", ["unet3d", "nnunet_style", "vnet"])
def test_paper_size_is_larger(arch):
    def count(n):
        return sum(p.numel() for p in n.parameters())

    assert count(build_segmenter(arch, size="paper")) > 10 * count(build_segmenter(arch))


def test_cpu_unet_is_small_enough_to_ship():
    n = sum(p.numel() for p in build_segmenter("unet3d").parameters())
    assert n * 4 < 20e6 / 4  # float32 weights far under the 20 MB file limit


@pytest.mark.parametrize("arch,kwargs", [
    ("unet3d", {"size": "huge"}),
    ("unet3d", {"features": (8,)}),
    ("unet3d", {"features": (8, 16, 32), "strides": [2]}),
    ("unet3d", {"in_channels": 0}),
    ("unet3d", {"dropout": 1.5}),
    ("unet3d", {"strides": [(1, 2), 2, 2]}),
    ("nnunet_style", {"patch_size": (4, 4, 4)}),
    ("nnunet_style", {"spacing": (1.0, -1.0, 1.0)}),
    ("vnet", {"kernel": 4}),
    ("unetr", {"img_size": (20, 32, 32)}),
    ("unetr", {"hidden_size": 100, "num_heads": 3}),
    ("swinunetr", {"feature_size": 10}),
])
def test_bad_arguments_raise_value_error(arch, kwargs):
    with pytest.raises(ValueError):
        build_segmenter(arch, **kwargs)


def test_unknown_name():
    with pytest.raises(ValueError, match="unknown segmenter"):
        build_segmenter("resnet")


def test_wrong_input_channels():
    with pytest.raises(ValueError, match="expects"):
        build_segmenter("unet3d")(torch.zeros(1, 3, 8, 8, 8))


def test_unetr_rejects_input_larger_than_its_size():
    net = build_segmenter("unetr", img_size=(16, 16, 16))
    with pytest.raises(ValueError, match="sliding-window"):
        net(torch.zeros(1, 1, 32, 16, 16))


def test_nnunet_plan_follows_anisotropy_rules():
    kernels, strides = nnunet_plan((32, 96, 96), (1.0, 0.33, 0.33))
    assert strides[1] == (1, 2, 2)  # thick z is not pooled until xy catches up
    assert kernels[0] == (1, 3, 3)  # no 3-wide kernel across thick slices at full resolution
    assert strides[2] == (2, 2, 2)
    # stops before a feature map would drop under 4 voxels
    assert all(n // s >= 4 for n, s in zip((32, 96, 96), _prod(strides), strict=True))
    k_iso, s_iso = nnunet_plan((64, 64, 64), (1.0, 1.0, 1.0))
    assert s_iso[1] == (2, 2, 2) and k_iso[0] == (3, 3, 3)
    assert len(s_iso) == 5  # 64 -> 32 -> 16 -> 8 -> 4


def _prod(strides):
    out = [1, 1, 1]
    for s in strides:
        out = [a * b for a, b in zip(out, s, strict=True)]
    return out
