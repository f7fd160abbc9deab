"""A run over some cases of a split makes only those cases' initial masks (``limit=1`` on synthetic_zbfwb
segmented all four 128 x 512 x 512 test volumes, 20 minutes, before scoring the first)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.evaluation import initial_masks


class _Case:
    def __init__(self, name: str) -> None:
        self.name = name


def test_only_the_selected_cases_are_segmented(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import neurorefiner.inference.init_masks as init_masks
    from neurorefiner.io import write_volume

    asked: list = []
    path = tmp_path / "vol_001.tif"
    write_volume(path, np.ones((2, 3, 3), bool))

    def fake(dataset, segmenter, split="test", dataset_kwargs=None, only=None, **kw):  # type: ignore[no-untyped-def]
        asked.append(only)
        return [path]

    monkeypatch.setattr(init_masks, "write_init_masks", fake)
    source = initial_masks.initial_mask("d", "unet3d", "test", None, ["vol_001"])
    assert source(_Case("vol_001"), np.zeros((2, 3, 3))).sum() == 18
    assert asked == [["vol_001"]]
