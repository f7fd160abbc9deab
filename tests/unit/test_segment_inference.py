"""Sliding-window inference, checkpoints (export/load, wrong architecture, foreign files), the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from neurorefiner.errors import InputError
from neurorefiner.inference.segmenter import export_segmenter, load_segmenter, segment_array, windows_count
from neurorefiner.io import read_volume, write_volume
from neurorefiner.models.segmenters.unet3d import UNet3D
from neurorefiner.models.segmenters.vnet import VNet
from neurorefiner.models.sliding_window import sliding_window_probs

UNET_CFG = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "features": [4, 8, 16],
            "first_stride": [1, 2, 2]}



@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    torch.manual_seed(0)
    net = UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2))
    return export_segmenter(net, UNET_CFG, tmp_path_factory.mktemp("ck") / "u.pt", (8, 16, 16),
                            meta={"note": "test"})


def test_export_load_roundtrip(ckpt):
    seg = load_segmenter(ckpt, expected_arch="unet3d")
    assert seg.arch == "unet3d" and seg.patch_size == (8, 16, 16) and seg.meta["note"] == "test"
    torch.manual_seed(0)
    ref = UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2)).eval()
    x = torch.rand(1, 1, 8, 16, 16)
    with torch.no_grad():
        assert torch.allclose(seg.net(x), ref(x), atol=1e-6)


def test_wrong_architecture_is_refused(ckpt, tmp_path):
    with pytest.raises(InputError, match="expected 'vnet'"):
        load_segmenter(ckpt, expected_arch="vnet")
    # VNet weights under a U-Net recipe: a clear error, not a state-dict traceback
    bad = export_segmenter(VNet(), UNET_CFG, tmp_path / "bad.pt", (8, 16, 16))
    with pytest.raises(InputError, match="do not fit"):
        load_segmenter(bad)
    # same architecture, another size
    other = export_segmenter(UNet3D(features=(8, 16, 32)), UNET_CFG, tmp_path / "size.pt", (8, 16, 16))
    with pytest.raises(InputError, match="another architecture or size"):
        load_segmenter(other)


def test_foreign_files_are_refused(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_segmenter(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="junk.pt"):
        load_segmenter(junk)
    torch.save({"state_dict": {}}, tmp_path / "plain.pt")
    with pytest.raises(InputError, match="not a neurorefiner segmenter"):
        load_segmenter(tmp_path / "plain.pt")
    torch.save({"format": "neurorefiner-segmenter/1", "net_config": {"_target_": "os.system"},
                "state_dict": {}, "patch_size": [8, 8, 8], "meta": {}}, tmp_path / "evil.pt")
    with pytest.raises(InputError, match="not a neurorefiner segmenter"):
        load_segmenter(tmp_path / "evil.pt")


def test_volume_smaller_than_patch_is_padded(ckpt):
    seg = load_segmenter(ckpt)
    image = np.random.default_rng(0).random((5, 9, 11)).astype(np.float32)
    mask, probs = segment_array(seg, image)
    assert mask.shape == probs.shape == image.shape and mask.dtype == bool
    assert np.isfinite(probs).all() and 0 <= probs.min() and probs.max() <= 1


def test_all_zero_image_gives_a_mask(ckpt):
    mask, probs = segment_array(load_segmenter(ckpt), np.zeros((10, 20, 20), np.uint8))
    assert mask.shape == (10, 20, 20) and np.isfinite(probs).all()


def test_nan_and_inf_are_clear_errors(ckpt):
    seg = load_segmenter(ckpt)
    image = np.ones((10, 20, 20), np.float32)
    image[3, 3, 3] = np.nan
    with pytest.raises(InputError, match="NaN/inf"):
        segment_array(seg, image, source="stack.tif")
    with pytest.raises(InputError, match="NaN/inf"):
        sliding_window_probs(seg.net, np.full((4, 4, 4), np.inf, np.float32), (8, 16, 16))
    with pytest.raises(InputError, match="3D"):
        segment_array(seg, np.ones((4, 4), np.float32))


def test_windowing_matches_a_single_pass_inside_one_window(ckpt):
    """With the whole volume in one window, sliding-window output equals one forward pass."""
    seg = load_segmenter(ckpt)
    image = np.random.default_rng(1).random((8, 16, 16)).astype(np.float32)
    probs = sliding_window_probs(seg.net, image, (8, 16, 16), overlap=0.5, mode="gaussian")
    with torch.no_grad():
        ref = torch.softmax(seg.net(torch.from_numpy(image)[None, None]), 1)[0, 1].numpy()
    np.testing.assert_allclose(probs, ref, atol=1e-5)
    const = sliding_window_probs(seg.net, np.random.default_rng(2).random((12, 40, 40)).astype(np.float32),
                                 (8, 16, 16), overlap=0.5, mode="constant")
    assert const.shape == (12, 40, 40)
    with pytest.raises(ValueError, match="overlap"):
        sliding_window_probs(seg.net, image, (8, 16, 16), overlap=1.0)
    with pytest.raises(ValueError, match="mode"):
        sliding_window_probs(seg.net, image, (8, 16, 16), mode="median")


def test_windows_count():
    assert windows_count((256, 256, 256), (128, 128, 128), 0.25) == 27
    assert windows_count((8, 16, 16), (8, 16, 16), 0.25) == 1


def _fibre_tif(tmp_path) -> np.ndarray:
    """img.tif in ``tmp_path``: one bright line in a dark 10x24x24 stack, spacing (1.0, 0.5, 0.5)."""
    image = np.zeros((10, 24, 24), np.uint8)
    image[5, 5:20, 12] = 200
    write_volume(tmp_path / "img.tif", image, spacing=(1.0, 0.5, 0.5))
    return image


def test_cli_segment_writes_mask_and_probability(ckpt, tmp_path):
    from neurorefiner.cli.main import app

    image = _fibre_tif(tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, ["segment", str(tmp_path / "img.tif"), "--model", str(ckpt), "--out",
                              str(tmp_path / "m.tif"), "--prob", str(tmp_path / "p.tif"), "--overlap", "0.5"])
    assert res.exit_code == 0, res.output
    m = read_volume(tmp_path / "m.tif")
    assert m.shape == image.shape and set(np.unique(m.load())) <= {0, 255}
    assert read_volume(tmp_path / "p.tif").load().dtype == np.float32
    res = runner.invoke(app, ["segment", str(tmp_path / "img.tif"), "--model", str(ckpt), "--out",
                              str(tmp_path / "m2.tif"), "--arch", "swinunetr"])
    assert res.exit_code == 2 and "expected 'swinunetr'" in res.output
    assert not (tmp_path / "m2.tif").exists()
    res = runner.invoke(app, ["segment", str(tmp_path / "img.tif"), "--model", str(ckpt), "--out",
                              str(tmp_path / "m3.tif"), "--patch", "8,16"])
    assert res.exit_code == 2


def test_cli_segment_bridges_gaps_with_the_files_or_the_given_spacing(ckpt, tmp_path):
    from neurorefiner.cli.main import app

    _fibre_tif(tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, ["segment", str(tmp_path / "img.tif"), "--model", str(ckpt), "--out",
                              str(tmp_path / "m.tif"), "--bridge-um", "3", "--spacing", "2,0.4,0.4"])
    assert res.exit_code == 0, res.output
    assert "'bridge_um': 3.0" in res.output
    assert read_volume(tmp_path / "m.tif").spacing == pytest.approx((2.0, 0.4, 0.4))
    res = runner.invoke(app, ["segment", str(tmp_path / "img.tif"), "--model", str(ckpt), "--out",
                              str(tmp_path / "m2.tif"), "--bridge-um", "-1"])
    assert res.exit_code == 2 and "bridge_um" in res.output
