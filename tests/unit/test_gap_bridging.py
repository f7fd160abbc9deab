"""Gap bridging (models.gap_bridging) and its place in the post-processing: fragments join the main component
across short physical gaps, speckle does not, refinement's M_init keeps its breaks."""

from __future__ import annotations

import json

import cc3d
import numpy as np
import pytest
import torch

from neurorefiner.errors import InputError
from neurorefiner.inference.segmenter import load_segmenter, record_postprocess, recorded_postprocess, segment_array
from neurorefiner.postprocessing.gap_bridging import bridge_gaps
from neurorefiner.postprocessing.masks import PostProcess, postprocess_mask
from tests.unit.test_segmenter_normalisation_and_postprocess import _stack, _tiny_export


def _broken_fibre(gap: int, tail: int = 30) -> np.ndarray:
    """A straight fibre along x (40 voxels), a gap of ``gap`` voxels, then ``tail`` voxels more."""
    mask = np.zeros((9, 20, 40 + gap + tail + 4), bool)
    mask[4, 10, 2:42] = True
    mask[4, 10, 42 + gap:42 + gap + tail] = True
    return mask


def _pieces(mask: np.ndarray, connectivity: int = 26) -> int:
    return int(cc3d.connected_components(mask, connectivity=connectivity, return_N=True)[1])


def test_a_short_gap_is_bridged_a_long_one_is_not():
    mask = _broken_fibre(gap=4)
    assert _pieces(mask) == 2
    joined = bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=6.0)
    assert _pieces(joined) == 1 and joined[mask].all()  # nothing removed
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=3.0)) == 2
    assert np.array_equal(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=0.0), mask)


def test_the_gap_is_measured_in_micrometres_not_voxels():
    mask = _broken_fibre(gap=4)  # 5 voxels between the ends along x
    assert _pieces(bridge_gaps(mask, (1.0, 0.33, 0.33), max_um=3.0)) == 1  # 5 x 0.33 um = 1.65 um
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=3.0)) == 2


def test_speckle_is_not_bridged():
    mask = _broken_fibre(gap=2, tail=5)  # a 5-voxel piece: under the 20-voxel minimum
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=10.0)) == 2
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=10.0, min_voxels=5)) == 1


def test_a_diagonal_bridge_connects_under_six_neighbours():
    # APP2 may trace with 6 or 18 neighbours; a bare 3D line steps through voxel corners
    mask = np.zeros((20, 20, 20), bool)
    mask[1:4, 1:4, 1:4] = True  # two 27-voxel blobs on a diagonal, ~8 um apart
    mask[8:11, 9:12, 10:13] = True
    joined = bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=12.0)
    assert _pieces(joined) == 1 and _pieces(joined, connectivity=6) == 1


def test_chains_of_fragments_join_over_several_passes():
    mask = np.zeros((5, 5, 120), bool)
    mask[2, 2, 0:40] = True  # main
    mask[2, 2, 44:64] = True  # joins in pass 1
    mask[2, 2, 68:88] = True  # 24 um from the main, 4 from the first fragment: pass 2
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=5.0)) == 1
    assert _pieces(bridge_gaps(mask, (1.0, 1.0, 1.0), max_um=5.0, passes=1)) == 2


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="3D"):
        bridge_gaps(np.zeros((4, 4), bool), (1.0, 1.0, 1.0), 3.0)
    with pytest.raises(ValueError, match="spacing"):
        bridge_gaps(np.zeros((4, 4, 4), bool), (1.0, 0.0, 1.0), 3.0)
    with pytest.raises(ValueError, match="bridge_um"):
        PostProcess(0.5, bridge_um=-1.0)


def test_postprocess_bridges_before_keeping_the_largest_component():
    probs = _broken_fibre(gap=4).astype(np.float32)
    kept = postprocess_mask(probs, PostProcess(0.5, 0, 1))
    assert kept.sum() == 40  # the tail is lost without bridging
    bridged = postprocess_mask(probs, PostProcess(0.5, 0, 1, bridge_um=6.0), spacing=(1.0, 1.0, 1.0))
    assert bridged[probs > 0.5].all() and _pieces(bridged) == 1
    with pytest.raises(ValueError, match="spacing"):
        postprocess_mask(probs, PostProcess(0.5, 0, 1, bridge_um=6.0))


def test_as_dict_keeps_the_old_keys_when_bridging_is_off():
    # masks caches and checkpoints recorded before bridging existed are keyed on these dicts
    assert PostProcess(0.8, 0, 1).as_dict() == {"threshold": 0.8, "dust_voxels": 0, "keep_largest": 1}
    assert PostProcess(0.8, 0, 1, 3.0).as_dict()["bridge_um"] == 3.0
    assert PostProcess(**PostProcess(0.8, 0, 1, 3.0).as_dict()) == PostProcess(0.8, 0, 1, 3.0)


def test_recorded_bridging_is_used_by_inference_and_needs_a_spacing(tmp_path, monkeypatch):
    export = _tiny_export(tmp_path, monkeypatch, n_test=1)
    record_postprocess(export, PostProcess(0.5, 0, 1, bridge_um=3.0), chosen_on="test")
    seg = load_segmenter(export)
    assert recorded_postprocess(seg).bridge_um == 3.0
    calls = []
    monkeypatch.setattr("neurorefiner.inference.segmenter.sliding_window_probs",
                        lambda *a, **k: calls.append(1) or np.zeros((16, 48, 48), np.float32))
    with pytest.raises(InputError, match="spacing"):
        segment_array(seg, _stack(), patch_size=(8, 16, 16))
    assert not calls  # refused before the slow part
    segment_array(seg, _stack(), patch_size=(8, 16, 16), spacing=(1.0, 0.33, 0.33))
    assert calls


def test_init_masks_leave_breaks_for_refinement(tmp_path, monkeypatch):
    from neurorefiner.inference import init_masks

    torch.manual_seed(0)
    export = _tiny_export(tmp_path, monkeypatch, n_test=1)
    record_postprocess(export, PostProcess(0.6, 0, 1, bridge_um=3.0), chosen_on="test")
    out = tmp_path / "m"
    init_masks.write_init_masks("tiny", "unet3d", export, "test", out, progress=False)
    assert json.loads((out / "manifest.json").read_text())["postprocess"] == {
        "threshold": 0.6, "dust_voxels": 0, "keep_largest": 0}


def test_init_masks_cli_overrides_read_the_checkpoint_once(tmp_path, monkeypatch):
    """--keep-largest/--bridge-um replace fields of the recorded setting; the checkpoint is loaded once (it was
    loaded a second time just to read that setting)."""
    from neurorefiner.inference import segmenter as inference

    torch.manual_seed(0)
    export = _tiny_export(tmp_path, monkeypatch, n_test=1)
    record_postprocess(export, PostProcess(0.6, 7, 0), chosen_on="test")
    loads = []
    real = inference.load_segmenter
    monkeypatch.setattr(inference, "load_segmenter", lambda *a, **k: loads.append(1) or real(*a, **k))
    out = tmp_path / "m"
    assert _cli(["--dataset", "tiny", "--model", str(export), "--out", str(out), "--keep-largest", "1",
                            "--bridge-um", "3"]) == 0
    assert len(loads) == 1
    assert json.loads((out / "manifest.json").read_text())["postprocess"] == {
        "threshold": 0.6, "dust_voxels": 7, "keep_largest": 1, "bridge_um": 3.0}
    assert _cli(["--dataset", "tiny", "--model", str(export), "--out", str(out), "--threshold",
                            "0.7"]) == 0
    assert json.loads((out / "manifest.json").read_text())["postprocess"] == {
        "threshold": 0.7, "dust_voxels": 7, "keep_largest": 0}


def _cli(args: list[str]) -> int:
    """``neurorefiner init-masks ARGS``; its exit code."""
    from typer.testing import CliRunner

    from neurorefiner.cli.main import app

    return CliRunner().invoke(app, ["init-masks", *args]).exit_code
