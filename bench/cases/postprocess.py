"""Cost of the segmenter's post-processing with gap bridging (models.gap_bridging), which the shipped DIADEM
U-Net may record: it runs after sliding-window inference, inside the segmenters' 30 s budget for 256^3.

The mask is OP_1's gold tree rasterised (real morphology, 1.5-voxel radius) on OP_1's grid (about 256^3 voxels)
and cut by a 3-voxel slab every 40 voxels along x: many fragments a few micrometres apart, as a network's mask
is broken at dim stretches. The reference is the same post-processing without bridging (threshold + keep the
largest component), so the ratio is what bridging adds."""

from __future__ import annotations

import numpy as np

from bench.core import Case
from neurorefiner.paths import data_dir

SPACING = (1.0, 0.33, 0.33)


def _broken_gold():
    from neurorefiner.io import read_swc, read_volume

    root = data_dir() / "diadem_op"
    shape = read_volume(root / "OP_1.tif").shape
    mask = read_swc(root / "OP_1.swc").rasterize(shape, SPACING, radius=1.5)
    for x in range(20, shape[2], 40):
        mask[:, :, x:x + 3] = False
    return mask.astype(np.float32)


def _post(probs, bridge_um: float):
    from neurorefiner.postprocessing.masks import PostProcess, postprocess_mask

    return postprocess_mask(probs, PostProcess(0.5, 0, 1, bridge_um), SPACING)


def _extra(probs, _t):
    import cc3d

    return {"voxels": int(probs.size),
            "fragments": int(cc3d.connected_components(probs > 0.5, connectivity=26, return_N=True)[1])}


CASES = [
    Case("postprocess/bridge_gaps_3um_OP_1_gold_cut", _broken_gold, lambda p: _post(p, 3.0),
         reference=lambda p: _post(p, 0.0), reference_name="threshold + keep largest, no bridging", repeats=3,
         budget_s=5.0, extra=_extra),
]
