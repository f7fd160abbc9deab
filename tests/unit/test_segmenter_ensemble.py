"""Averaged ensembles of segmenters (neurorefiner.inference.ensemble): one checkpoint whose
probabilities are the members' mean, loadable wherever a single segmenter is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurorefiner.errors import InputError
from neurorefiner.inference.ensemble import export_ensemble
from neurorefiner.inference.segmenter import export_segmenter, load_segmenter, max_input_of, segment_array
from neurorefiner.models.segmenters.ensemble import AveragedEnsemble
from neurorefiner.models.segmenters.unet3d import UNet3D

CFG = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "features": [4, 8, 16], "first_stride": [1, 2, 2]}


def _member(tmp_path, seed: int, cases: list[str], patch=(8, 16, 16), norm=(1.0, 99.5)):
    torch.manual_seed(seed)
    net = UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2))
    spec = {"method": "percentile", "percentiles": list(norm)}
    return export_segmenter(net, CFG, tmp_path / f"m{seed}.pt", patch, normalization=spec,
                            meta={"train_cases": cases, "postprocess": {"threshold": 0.8, "dust_voxels": 0,
                                                                          "keep_largest": 1}})


def test_ensemble_probabilities_are_the_members_mean(tmp_path):
    paths = [_member(tmp_path, 0, ["OP_1"]), _member(tmp_path, 1, ["OP_2"])]
    out = export_ensemble(paths, tmp_path / "ens.pt")
    ens = load_segmenter(out, expected_arch="unet3d")  # an ensemble of U-Nets passes the U-Net check
    assert ens.arch == "unet3d" and ens.patch_size == (8, 16, 16) and ens.normalization == (1.0, 99.5)
    assert ens.meta["train_cases"] == ["OP_1", "OP_2"] and len(ens.meta["members"]) == 2
    assert "postprocess" not in ens.meta  # a member's threshold was not chosen for the average
    x = torch.rand(2, 1, 8, 16, 16)
    with torch.no_grad():
        mean = torch.stack([load_segmenter(p).net(x).softmax(1) for p in paths]).mean(0)
        got = ens.net(x).softmax(1)
    assert torch.allclose(got, mean, atol=1e-5)
    image = np.random.default_rng(0).random((8, 20, 24)).astype(np.float32)
    mask, probs = segment_array(ens, image)
    assert mask.shape == probs.shape == image.shape and 0.0 <= probs.min() <= probs.max() <= 1.0


def test_members_trained_differently_are_refused_naming_the_file(tmp_path):
    a = _member(tmp_path, 0, ["OP_1"])
    b = _member(tmp_path, 1, ["OP_2"], patch=(8, 32, 32))
    with pytest.raises(InputError, match="patch size") as err:
        export_ensemble([a, b], tmp_path / "ens.pt")
    assert "m1.pt" in str(err.value)
    c = _member(tmp_path, 2, ["OP_2"], norm=(0.5, 99.9))
    with pytest.raises(InputError, match="normalisation"):
        export_ensemble([a, c], tmp_path / "ens.pt")
    assert not (tmp_path / "ens.pt").exists()
    with pytest.raises(ValueError, match="at least two"):
        export_ensemble([a], tmp_path / "ens.pt")


def test_nested_ensembles_are_refused_and_free_size_members_give_no_limit():
    assert max_input_of(AveragedEnsemble([CFG, CFG])) is None
    with pytest.raises(ValueError, match="single networks"):
        AveragedEnsemble([CFG, {"members": [CFG, CFG]}])


def test_card_of_an_ensemble_lists_each_member(tmp_path):
    from neurorefiner.training.segmenter import provenance_markdown

    paths = [_member(tmp_path, 0, ["OP_1"]), _member(tmp_path, 1, ["OP_2"])]
    card = provenance_markdown(export_ensemble(paths, tmp_path / "ens.pt"), "cmd")
    assert "an average of 2 networks" in card and "2 x neurorefiner.models.segmenters.unet3d.UNet3D" in card
    assert "member 0" in card and "member 1" in card and "['OP_2']" in card


def test_sliding_window_map_of_an_ensemble_is_the_mean_of_its_members_maps(tmp_path):
    from neurorefiner.models.sliding_window import sliding_window_probs

    paths = [_member(tmp_path, 0, ["OP_1"]), _member(tmp_path, 1, ["OP_2"])]
    ens = load_segmenter(export_ensemble(paths, tmp_path / "ens.pt"))
    image = np.random.default_rng(1).random((12, 40, 40)).astype(np.float32)  # several overlapping windows
    got = sliding_window_probs(ens.net, image, (8, 16, 16), overlap=0.5)
    want = np.mean([sliding_window_probs(load_segmenter(p).net, image, (8, 16, 16), overlap=0.5) for p in paths], 0)
    assert np.abs(got - want).max() < 1e-6  # blending the ensemble's log-probabilities differs at overlaps
