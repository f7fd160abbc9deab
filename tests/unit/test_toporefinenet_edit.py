"""TopoRefiner (inference API) and `neurorefiner edit`: load from a checkpoint file alone, edit a block,
leave the rest of the mask untouched, and turn bad input into one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from neurorefiner.cli.edit import parse_block
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError
from neurorefiner.inference.refiner import TopoRefiner
from neurorefiner.io import read_mask, write_volume
from neurorefiner.models.toporefinenet import TopoRefineNet

runner = CliRunner()
NET = {"_target_": "neurorefiner.models.toporefinenet.TopoRefineNet", "channels": [4, 8], "text_dim": 16}
TE = {"_target_": "neurorefiner.models.text_encoders.HashingEncoder", "dim": 16}


@pytest.fixture()
def ckpt(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    path = tmp_path / "toporefinenet.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
                "hyper_parameters": {"net_config": NET, "text_encoder_config": TE, "stage": 1}}, path)
    return path


@pytest.fixture()
def stack(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    rng = np.random.default_rng(0)
    image = (rng.random((6, 20, 20)) * 200).astype(np.uint8)
    mask = np.zeros((6, 20, 20), bool)
    mask[3, 10, :] = True
    write_volume(tmp_path / "img.tif", image)
    write_volume(tmp_path / "mask.tif", mask)
    return tmp_path / "img.tif", tmp_path / "mask.tif", mask


def test_refiner_loads_and_edits(ckpt):
    r = TopoRefiner.load(ckpt, decoding="raw")
    img = np.random.default_rng(1).random((5, 9, 7)).astype(np.float32)
    msk = np.zeros((5, 9, 7), bool)
    out = r.edit(img, msk, "Repair break at top-left-front")
    assert out.dtype == bool and out.shape == msk.shape
    p = r.probabilities(img, msk, "Repair break at top-left-front")
    assert np.array_equal(out, p >= 0.5)
    # the default decoding has nothing to connect in an empty block: unchanged, and it says why
    res = TopoRefiner.load(ckpt).edit_result(img, msk, "Repair break at top-left-front")
    assert not res.changed and not res.mask.any() and "nothing to connect" in res.reason
    with pytest.raises(InputError, match="differ"):
        r.edit(img, msk[:, :3], "Repair break at top-left-front")
    with pytest.raises(InputError, match="instruction"):
        r.edit(img, msk, "  ")


def test_refiner_load_errors(tmp_path):
    with pytest.raises(InputError, match="no such checkpoint"):
        TopoRefiner.load(tmp_path / "none.ckpt")
    (tmp_path / "junk.ckpt").write_bytes(b"junk")
    with pytest.raises(InputError, match="junk.ckpt"):
        TopoRefiner.load(tmp_path / "junk.ckpt")
    torch.save({"state_dict": {}}, tmp_path / "other.ckpt")
    with pytest.raises(InputError, match="train_refiner"):
        TopoRefiner.load(tmp_path / "other.ckpt")


def test_parse_block():
    assert parse_block("1:3,:5,2:", (4, 6, 8)) == (slice(1, 3), slice(0, 5), slice(2, 8))
    assert parse_block(None, (4, 6, 8)) == (slice(0, 4), slice(0, 6), slice(0, 8))
    for bad in ["1:3,0:5", "1:9,0:5,0:8", "a:b,0:5,0:8", "3:3,0:5,0:8"]:
        with pytest.raises(InputError, match="--block"):
            parse_block(bad, (4, 6, 8))


def test_edit_command_changes_only_the_block(stack, ckpt, tmp_path):
    img, msk, mask = stack
    out = tmp_path / "out.tif"
    res = runner.invoke(app, ["edit", str(img), str(msk), "--instruction", "repair the break at Top Left Rear",
                              "--block", "0:6,0:10,0:10", "--out", str(out), "--checkpoint", str(ckpt)])
    assert res.exit_code == 0, res.output
    assert "Repair break at top-left-rear" in res.output
    edited = read_mask(out).load()
    assert edited.shape == mask.shape
    outside = np.ones(mask.shape, bool)
    outside[0:6, 0:10, 0:10] = False
    assert np.array_equal(edited[outside], mask[outside])


def test_edit_decodes_with_the_loops_editor_settings(stack, ckpt, tmp_path, monkeypatch):
    """`neurorefiner edit` decoded with the decoder's built-in defaults (short gap 0, tube pad 0.5, max radius 3.0),
    the loop with conf/editor/toporefinenet.yaml's (10, 0.0, 1.5): one instruction on one crop, two edits."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.refine.run import editor_factory

    built: list[TopoRefiner] = []
    load = TopoRefiner.load.__func__

    def spy(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(load(cls, *args, **kwargs))
        return built[-1]

    monkeypatch.setattr(TopoRefiner, "load", classmethod(spy))
    img, msk, _ = stack
    res = runner.invoke(app, ["edit", str(img), str(msk), "--instruction", "Repair break at top-left-rear",
                              "--out", str(tmp_path / "out.tif"), "--checkpoint", str(ckpt)])
    assert res.exit_code == 0, res.output
    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
        cfg = compose(config_name="refine", overrides=["image=a.tif", "mask=b.tif", f"editor.checkpoint={ckpt}",
                                                       "paths.output_dir=/tmp/nr-unused"])
    editor_factory(cfg.editor)()   # what the loop's editor builds on its first edit
    command, loop = built
    keys = ("decoding_config", "threshold", "confine_margin", "crop_margin", "decoding", "operation_gate", "device")
    assert {k: getattr(command, k) for k in keys} == {k: getattr(loop, k) for k in keys}
    assert command.decoding_config.short_gap_voxels == cfg.editor.decoding.short_gap_voxels


@pytest.mark.parametrize("args,msg", [
    (["--instruction", "make it nicer"], "Repair break at <position>"),  # the grammar is listed
    (["--instruction", "Repair break at top-left-rear", "--block", "0:99,0:5,0:5"], "--block"),
    (["--instruction", "Repair break at top-left-rear", "--confine-margin", "-3"], "--confine-margin"),
])
def test_edit_bad_input_one_line_exit_2(stack, ckpt, tmp_path, args, msg):
    img, msk, _ = stack
    out = tmp_path / "never.tif"
    res = runner.invoke(app, ["edit", str(img), str(msk), *args, "--out", str(out), "--checkpoint", str(ckpt)])
    assert res.exit_code == 2 and msg in res.output and "Traceback" not in res.output
    assert not out.exists()


class _FlipEverything(torch.nn.Module):
    """A stand-in network that turns every voxel on: shows what confinement keeps."""

    spatial_dims, text_dim, region_channel = 3, 16, True

    def __init__(self) -> None:
        super().__init__()
        self.seen_region = None

    def forward(self, image, mask, emb, region=None):
        self.seen_region = region
        return torch.cat([torch.zeros_like(image), torch.ones_like(image)], dim=1)

    @staticmethod
    def probabilities(logits):
        return torch.softmax(logits, dim=1)[:, 1:2]


def test_edit_is_confined_to_the_named_place_and_region_reaches_the_net():
    from neurorefiner.models.text_encoders import HashingEncoder
    from neurorefiner.topology.instructions import parse_instruction

    net = _FlipEverything()
    shape = (9, 30, 30)
    img, msk = np.zeros(shape, np.float32), np.zeros(shape, bool)
    ins = "Repair break at top-left-front"
    named = parse_instruction(ins).region(shape)
    raw = TopoRefiner(net, HashingEncoder(dim=16), confine_margin=None, decoding="raw").edit(img, msk, ins)
    assert raw.all()
    assert np.array_equal(net.seen_region[0, 0].numpy() > 0, named)
    tight = TopoRefiner(net, HashingEncoder(dim=16), confine_margin=0, decoding="raw").edit(img, msk, ins)
    assert np.array_equal(tight, named)
    loose = TopoRefiner(net, HashingEncoder(dim=16), confine_margin=2, decoding="raw").edit(img, msk, ins)
    assert named.sum() < loose.sum() < loose.size and not loose[-1, -1, -1]
    with pytest.raises(InputError, match="cannot read instruction"):
        TopoRefiner(net, HashingEncoder(dim=16)).edit(img, msk, "make it nicer please")


class _ShapeSpy(torch.nn.Module):
    """A stand-in network that records the size it is given and marks every voxel it saw with 0.75."""

    spatial_dims, text_dim, region_channel, min_size = 3, 16, True, 4

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, ...]] = []

    def forward(self, image, mask, emb, region=None):
        self.seen.append(tuple(image.shape[2:]))
        p = torch.full_like(image, 0.75)
        return torch.cat([torch.log(1 - p), torch.log(p)], dim=1)

    @staticmethod
    def probabilities(logits):
        return torch.softmax(logits, dim=1)[:, 1:2]


def test_crop_box_grows_the_named_place_on_the_network_grid():
    from neurorefiner.inference.refiner import crop_box

    region = np.zeros((64, 128, 128), bool)
    region[43:64, 0:43, 43:86] = True
    box = crop_box(region, 16, 8)
    assert box == (slice(24, 64), slice(0, 64), slice(24, 104))
    assert all(b.start % 8 == 0 for b in box)
    assert crop_box(region, 200, 8) == (slice(0, 64), slice(0, 128), slice(0, 128))


def test_network_sees_a_crop_around_the_named_place_and_the_mask_stands_for_it_elsewhere():
    from neurorefiner.models.text_encoders import HashingEncoder

    shape = (24, 96, 96)
    img, msk = np.zeros(shape, np.float32), np.zeros(shape, bool)
    msk[12, 80, :] = True
    ins = "Repair break at top-left-front"
    net = _ShapeSpy()
    r = TopoRefiner(net, HashingEncoder(dim=16), crop_margin=8)
    p = r.probabilities(img, msk, ins)
    assert net.seen[-1] == (16, 40, 40)  # the named cell (8, 32, 32) + 8 voxels of context, on the grid
    assert np.allclose(p[:16, :40, :40], 0.75)
    assert np.array_equal(p[:, 40:, :], msk[:, 40:, :].astype(np.float32))  # outside: the input mask
    r.probabilities(img, msk, ins, crop=False)
    assert net.seen[-1] == shape
    r.edit_result(img, msk, ins)  # the topology decoding: the crop
    assert net.seen[-1] == (16, 40, 40)
    TopoRefiner(net, HashingEncoder(dim=16), crop_margin=8, decoding="raw").edit_result(img, msk, ins)
    assert net.seen[-1] == shape  # the raw decoding: the network's view of the whole block
    whole = TopoRefiner(net, HashingEncoder(dim=16), crop_margin=None)
    whole.probabilities(img, msk, ins)
    assert net.seen[-1] == shape
    with pytest.raises(ValueError, match="reach"):
        TopoRefiner(net, HashingEncoder(dim=16), crop_margin=2)


def test_crop_keeps_the_block_positions_and_the_network_output_near_the_named_place():
    from neurorefiner.inference.refiner import _block_positions
    from neurorefiner.models.text_encoders import HashingEncoder

    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8, 16), text_dim=16, region_channel=True).eval()
    block = (16, 48, 48)
    full_feat = torch.zeros(1, 16, 4, 12, 12)
    whole = net._position(full_feat, block)
    with _block_positions(net, (4, 16, 8), block):
        part = net._position(torch.zeros(1, 16, 2, 6, 6), (8, 24, 24))
    # the crop's bottleneck cells carry the embedding of the same cells of the whole block
    assert torch.allclose(part, whole[:, :, 1:3, 4:10, 2:8], atol=1e-6)
    assert not hasattr(net.__dict__, "_position") and "_position" not in net.__dict__
    rng = np.random.default_rng(0)
    img = rng.random(block).astype(np.float32)
    msk = np.zeros(block, bool)
    msk[8, 20:23, :] = True
    ins = "Repair break at center-center-center"
    r = TopoRefiner(net, HashingEncoder(dim=16), crop_margin=1000)
    assert np.allclose(r.probabilities(img, msk, ins), r.probabilities(img, msk, ins, crop=False), atol=1e-6)
