"""The trace-aware checkpoint pick: validation traces the thresholded mask with APP2 from the gold root and
``segmentation.pick: trace`` exports the checkpoint with the best validation F1, not only the best Dice."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from neurorefiner.data.datamodules.segmentation import LoadedCase, centre_crop_on_label, crop_tree
from neurorefiner.io.swc import Tree
from neurorefiner.models.segmentation_module import trace_scores
from neurorefiner.training.segmenter import pick_metric

SPACING = (1.0, 1.0, 1.0)


def _line_tree(n: int = 40) -> Tree:
    zyx = np.stack([np.full(n, 8.0), np.full(n, 16.0), np.arange(4.0, 4.0 + n)], axis=1)
    return Tree.from_points(zyx, np.arange(-1, n - 1), radius=1.5)


def test_trace_scores_of_the_gold_mask_and_of_nothing() -> None:
    gold = _line_tree()
    mask = gold.rasterize((16, 32, 56), SPACING)
    good = trace_scores(mask, gold, SPACING)
    assert good["trace_f1"] > 0.9
    half = mask.copy()
    half[..., 24:] = False  # the trace covers half the neurite
    assert 0.3 < trace_scores(half, gold, SPACING)["trace_f1"] < good["trace_f1"]
    assert trace_scores(np.zeros_like(mask), gold, SPACING)["trace_f1"] == 0.0
    assert trace_scores(mask, None, SPACING) == {}


def test_crop_tree_keeps_the_nodes_inside_and_shifts_them() -> None:
    tree = _line_tree()
    box = (slice(0, 16), slice(8, 24), slice(10, 30))
    out = crop_tree(tree, box)
    assert len(out) == 20
    assert out.zyx[:, 2].min() == 0.0 and out.zyx[:, 2].max() == 19.0
    assert np.all(out.zyx[:, 1] == 8.0)
    assert crop_tree(None, box) is None


def test_validation_crop_carries_its_gold_tree() -> None:
    gold = _line_tree(80)
    label = gold.rasterize((16, 32, 96), SPACING).astype(np.uint8)
    case = LoadedCase("c", np.zeros(label.shape, np.float32), label, np.flatnonzero(label), gold, SPACING)
    cropped = centre_crop_on_label(case, (16, 32, 48))
    assert cropped.image.shape == (16, 32, 48) and cropped.spacing == SPACING
    assert trace_scores(cropped.label > 0, cropped.gold, SPACING)["trace_f1"] > 0.9


@pytest.mark.parametrize(("pick", "trace_val", "expected"), [
    ("dice", False, "val/dice"), ("trace", True, "val/trace_f1"), ("dice", True, "val/dice")])
def test_pick_metric(pick: str, trace_val: bool, expected: str) -> None:
    seg = OmegaConf.create({"pick": pick, "module": {"trace_val": trace_val}})
    assert pick_metric(seg) == expected


def test_pick_metric_refuses_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="trace_val"):
        pick_metric(OmegaConf.create({"pick": "trace", "module": {"trace_val": False}}))
    with pytest.raises(ValueError, match="pick must be"):
        pick_metric(OmegaConf.create({"pick": "loss", "module": {}}))
    assert pick_metric(OmegaConf.create({"module": {}})) == "val/dice"  # the default: every DIADEM recipe
