"""The gold-extent diagnostic (neurorefiner.studies.gold_scope, `neurorefiner study gold-scope`): the box, the crop
and the share of a trace outside it are what its table says they are."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import neurorefiner.studies.gold_scope as gs
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError


def test_scope_box_grows_by_the_margin_and_stays_inside_the_volume():
    gold = np.array([[2.0, 10.2, 30.0], [5.0, 20.0, 39.6]])
    box = gs.scope_box(gold, (8, 64, 42), margin=3)
    assert box == (slice(0, 8), slice(7, 24), slice(27, 42))


def test_crop_zeroes_outside_and_keeps_the_largest_piece_inside():
    mask = np.zeros((4, 10, 30), bool)
    mask[2, 5, 0:30] = True  # a fibre crossing the box's edge
    mask[1, 1, 12:14] = True  # a small blob inside
    box = (slice(0, 4), slice(0, 10), slice(10, 20))
    inner = gs.crop_to(mask, box, keep_largest=True)
    assert inner.shape == mask.shape and inner[2, 5, 10:20].all() and inner.sum() == 10
    assert gs.crop_to(mask, box, keep_largest=False).sum() == 12


def test_share_outside_counts_trace_nodes_beyond_the_box():
    zyx = np.array([[0, 0, 0], [0, 0, 5], [0, 0, 15], [0, 0, 25]], float)
    assert gs.share_outside(zyx, (slice(0, 1), slice(0, 1), slice(0, 10))) == 0.5
    assert gs.share_outside(np.zeros((0, 3)), (slice(0, 1),) * 3) == 0.0


def test_missing_masks_are_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no out-of-fold maps"):
        gs.unet_masks("dev", 0.8, cv_root=tmp_path)
    with pytest.raises(InputError, match="segmenter-rows"):
        gs.unet_masks("test", 0.8, mask_folder=tmp_path)
    done = CliRunner().invoke(app, ["study", "gold-scope", "--split", "val", "--out", str(tmp_path)])
    assert done.exit_code == 2 and "--split must be dev or test" in done.output
