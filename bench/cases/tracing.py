"""APP2 speed on DIADEM-size masks, as a ratio to kimimaro's TEASAR skeletonisation of the same mask
(the fastest maintained skeletoniser in Python). Targets: under 5 s and at most 3x kimimaro."""

from __future__ import annotations

import numpy as np

from bench.core import Case


def _gold_mask():
    """OP_6 (512 x 512 x 101): its gold SWC rasterised with the evaluation's tube radius (1.5 voxels)."""
    from neurorefiner.data import get_dataset

    case = [c for c in get_dataset("diadem").cases("dev") if c.name == "OP_6"][0]
    shape = case.image().shape
    return case.label(shape), case.spacing


def _image_mask():
    """OP_6 image thresholded at 40: a thicker, noisier segmentation-like mask of the same size."""
    from neurorefiner.data import get_dataset

    case = [c for c in get_dataset("diadem").cases("dev") if c.name == "OP_6"][0]
    return case.image().load() > 40, case.spacing


def _app2(arg):
    from neurorefiner.tracing.app2 import trace_mask

    mask, spacing = arg
    return trace_mask(mask, spacing)


def _kimimaro(arg):
    import kimimaro

    mask, spacing = arg
    return kimimaro.skeletonize(mask.astype(np.uint8), anisotropy=tuple(float(s) for s in spacing),
                                dust_threshold=0, progress=False, parallel=1)


def _extra(arg, t):
    mask, _ = arg
    return {"fg_voxels": float(mask.sum()), "mvox_per_s": mask.size / t / 1e6}


CASES = [
    Case("tracing/app2_OP_6_gold_mask", _gold_mask, _app2, reference=_kimimaro,
         reference_name="kimimaro TEASAR", repeats=3, budget_s=5.0, extra=_extra,
         notes="target: ratio <= 3"),
    Case("tracing/app2_OP_6_thresholded_image", _image_mask, _app2, reference=_kimimaro,
         reference_name="kimimaro TEASAR", repeats=3, budget_s=5.0, extra=_extra,
         notes="target: ratio <= 3"),
]
