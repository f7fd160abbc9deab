"""Sliding-window inference speed of the CPU 3D U-Net (target: a 256^3 volume under 30 s on 2 cores).

The reference is one forward pass over the same 256^3 voxels in a single piece, so the ratio is the
overhead of windowing (overlapping windows, Gaussian blending, padding)."""

from __future__ import annotations

import numpy as np
import torch

from bench.core import Case, sized

SHAPE = sized((256, 256, 256), (32, 64, 64))
INFER_PATCH = sized((64, 128, 128), (32, 64, 64))  # inference window (the network is fully convolutional)
WIDE_PATCH = sized((64, 256, 256), (32, 64, 64))
# full-width windows: 1.25x the volume in windows instead of 2.8x; what
# `neurorefiner segment` and init_masks use by default (inference.default_window of the shipped 24x128x128 patch)
OVERLAP = 0.25


def _setup():
    from neurorefiner.models.segmenters.unet3d import UNet3D

    torch.manual_seed(0)
    net = UNet3D(first_stride=(1, 2, 2)).eval()
    image = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    return net, image


def _setup_ensemble(members: int = 3):
    """An averaged ensemble (models.segmenters.ensemble): ``members`` CPU U-Nets averaged."""
    from neurorefiner.models.segmenters.ensemble import AveragedEnsemble

    cfg = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "first_stride": [1, 2, 2]}
    single, image = _setup()
    torch.manual_seed(0)
    return AveragedEnsemble([cfg] * members).eval(), single, image


def _windowed(arg, patch=INFER_PATCH):
    from neurorefiner.models.sliding_window import sliding_window_probs

    net, image = arg
    return sliding_window_probs(net, image, patch, overlap=OVERLAP, mode="gaussian")


def _single_pass(arg):
    net, image = arg
    with torch.inference_mode():
        return torch.softmax(net(torch.from_numpy(image)[None, None]), 1)[0, 1].numpy()


def _extra(arg, t, patch=INFER_PATCH):
    from neurorefiner.inference.segmenter import windows_count

    n = windows_count(SHAPE, patch, OVERLAP)
    return {"windows": n, "voxels_per_s": float(np.prod(SHAPE)) / t,
            "window_voxels_over_volume": n * float(np.prod(patch)) / float(np.prod(SHAPE))}


CASES = [
    Case("segmentation/sliding_window_unet3d_cpu_256^3", _setup, _windowed, reference=_single_pass,
         reference_name="one forward pass over the same 256^3 voxels", repeats=1, budget_s=30.0, extra=_extra),
    # the same network with full-width windows (the default of `neurorefiner segment` and init_masks)
    Case("segmentation/sliding_window_unet3d_cpu_256^3_wide", _setup, lambda a: _windowed(a, WIDE_PATCH),
         reference=_single_pass, reference_name="one forward pass over the same 256^3 voxels", repeats=1,
         budget_s=30.0, extra=lambda a, t: _extra(a, t, WIDE_PATCH)),
    # an average of three U-Nets (seeds) in one checkpoint costs three networks' time; the reference is one
    # U-Net with the same windows, so the ratio says what averaging adds. Held to the 30 s budget like any
    # U-Net: it is over, which is why no ensemble is shipped
    Case("segmentation/sliding_window_unet3d_x3_ensemble_cpu_256^3_wide", _setup_ensemble,
         lambda a: _windowed((a[0], a[2]), WIDE_PATCH), reference=lambda a: _windowed((a[1], a[2]), WIDE_PATCH),
         reference_name="one CPU U-Net, the same wide windows", repeats=1, budget_s=30.0,
         extra=lambda a, t: _extra(a, t, WIDE_PATCH)),
]
