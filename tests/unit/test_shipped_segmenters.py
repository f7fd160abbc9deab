"""Every checkpoint shipped under checkpoints/segmenters/ loads, stays under the 20 MB limit, has its card
beside it, and records the post-processing its card states (what inference and init_masks will use)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess

SHIPPED = sorted((Path(__file__).resolve().parents[2] / "checkpoints" / "segmenters").glob("*.pt"))


def test_there_are_shipped_segmenters():
    names = {p.stem for p in SHIPPED}
    assert {"unet3d_diadem_cpu", "nnunet_style_diadem_cpu"} <= names
    assert {f"unet3d_synthetic_{p}_cpu" for p in ("cwmbs_weak", "cwmbs_noise", "zbfwb", "bigneuron")} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_segmenter_loads_and_has_its_card(path):
    assert path.stat().st_size < 20 * 2**20
    card = path.with_suffix(".md")
    assert card.exists(), f"{path.name} has no card"
    seg = load_segmenter(path)
    post = seg.meta.get("postprocess")
    if post:  # the card's provenance line was written from the file: they must agree
        assert f"post-processing recorded for inference: {post}" in card.read_text()
    assert recorded_postprocess(seg).threshold > 0
