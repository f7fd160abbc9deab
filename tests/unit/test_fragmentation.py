"""The fragmentation measure: runs along the gold path, breaks per mm, and the root's piece."""

import numpy as np
import pytest

from neurorefiner.errors import InputError
from neurorefiner.io.swc import Tree
from neurorefiner.studies.fragmentation import fragmentation, summarise


def _line_tree(n: int = 60) -> Tree:
    zyx = np.stack([np.full(n, 5.0), np.full(n, 10.0), np.arange(n, dtype=float) + 2], axis=1)
    return Tree.from_points(zyx, np.arange(n) - 1)  # root at x = 2


def _mask(gaps: list[tuple[int, int]]) -> np.ndarray:
    m = np.zeros((10, 20, 70), bool)
    m[4:7, 9:12, 2:62] = True
    for a, b in gaps:
        m[:, :, a:b] = False
    return m


def test_whole_mask_is_one_run_on_the_root_piece():
    f = fragmentation(_mask([]), _line_tree(), (1.0, 1.0, 1.0))
    assert f["segments"] == 1 and f["pieces"] == 1 and f["breaks_per_mm"] == 0
    assert f["covered"] == pytest.approx(1.0) and f["root_piece"] == pytest.approx(1.0)


def test_a_gap_splits_the_path_and_the_root_piece_shrinks():
    # a 10-voxel gap at x 20-30: beyond the 2 um tolerance in its middle, so the path leaves the mask
    f = fragmentation(_mask([(20, 30)]), _line_tree(), (1.0, 1.0, 1.0))
    assert f["segments"] == 2 and f["pieces"] == 2
    assert f["covered"] < 0.95
    assert 0.25 < f["root_piece"] < 0.35  # x 2-19 of 2-61 (plus half edges at the tolerance)
    assert f["breaks_per_mm"] == pytest.approx(1 / (59 / 1000.0), rel=1e-6)


def test_a_break_near_the_root_leaves_little_on_the_root_piece():
    f = fragmentation(_mask([(6, 12)]), _line_tree(), (1.0, 1.0, 1.0))
    assert f["root_piece"] < 0.1 and f["segments"] == 2


def test_an_empty_gold_tree_is_an_input_error():
    with pytest.raises(InputError, match="gold tree is empty"):
        fragmentation(_mask([]), Tree.empty(), (1.0, 1.0, 1.0))


def test_summary_pools_breaks_over_gold_length():
    rows = [{"dataset": "d", "split": "s", "segmenter": "u", "case": "a", "gold_mm": 1.0, "covered": 1.0,
             "segments": 3, "breaks_per_mm": 2.0, "pieces": 3, "root_piece": 0.5},
            {"dataset": "d", "split": "s", "segmenter": "u", "case": "b", "gold_mm": 3.0, "covered": 1.0,
             "segments": 1, "breaks_per_mm": 0.0, "pieces": 1, "root_piece": 1.0}]
    (s,) = summarise(rows)
    assert s["breaks_per_mm"] == pytest.approx(0.5) and s["root_piece"] == pytest.approx(0.75)


def test_a_dataset_spec_may_name_its_segmenter():
    from neurorefiner.cli.study.fragmentation import parse_dataset_spec

    assert parse_dataset_spec("diadem:dev", "unet3d") == ("diadem", "dev", "unet3d")
    assert parse_dataset_spec("synthetic_cwmbs_weak:test:nnunet_style", "unet3d") == (
        "synthetic_cwmbs_weak", "test", "nnunet_style")
    for bad in ("diadem", "diadem:", "a:b:c:d", "a::c"):
        with pytest.raises(InputError, match="dataset:split"):
            parse_dataset_spec(bad, "unet3d")
