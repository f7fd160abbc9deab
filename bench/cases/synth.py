"""Synthetic stack generation speed (target: one 256^3 stack in under 5 s on 2 cores).

The reference, timed in the same process, is one scipy Gaussian blur of a float32 volume of the
same size: the renderer's cost in units of the cheapest whole-volume operation it must do anyway.
"""

from __future__ import annotations

import numpy as np

from bench.core import Case, sized

SMOKE_SHAPE = (48, 48, 48)


def _setup(preset: str, shape: tuple[int, int, int]):
    def setup():
        from neurorefiner.synth.presets import preset_params

        params = preset_params(preset).replace(shape=shape)
        volume = np.random.default_rng(0).random(shape, dtype=np.float32)
        return params, volume

    return setup


def _render(arg) -> None:
    from neurorefiner.synth import render_volume

    render_volume(arg[0], 0)


def _gaussian(arg) -> None:
    from scipy import ndimage as ndi

    ndi.gaussian_filter(arg[1], (0.6, 1.0, 1.0), truncate=3.0)


def _voxels(arg, t: float) -> dict:
    return {"Mvoxel_per_s": float(np.prod(arg[0].shape)) / 1e6 / t}


CASES = [
    Case("synth/render_cwmbs_weak_256^3", _setup("synthetic_cwmbs_weak", sized((256, 256, 256), SMOKE_SHAPE)), _render,
         reference=_gaussian, reference_name="scipy gaussian_filter 256^3", repeats=3, budget_s=5.0,
         extra=_voxels),
    Case("synth/render_cwmbs_noise_256^3",
         _setup("synthetic_cwmbs_noise", sized((256, 256, 256), SMOKE_SHAPE)), _render,
         reference=_gaussian, reference_name="scipy gaussian_filter 256^3", repeats=3, budget_s=5.0,
         extra=_voxels),
    Case("synth/render_zbfwb_128x512x512", _setup("synthetic_zbfwb", sized((128, 512, 512), SMOKE_SHAPE)), _render,
         reference=_gaussian, reference_name="scipy gaussian_filter 128x512x512", repeats=2, budget_s=10.0,
         extra=_voxels),
    Case("synth/render_tiny_64^3", _setup("tiny", sized((64, 64, 64), SMOKE_SHAPE)), _render,
         reference=_gaussian, reference_name="scipy gaussian_filter 64^3", repeats=5, budget_s=0.5,
         extra=_voxels),
]
