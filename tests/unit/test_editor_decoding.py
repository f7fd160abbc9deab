"""Topology-aware decoding of TopoRefineNet's output: remove only isolated pieces (a neurite crossing the
named cell is never cut, also where it leaves the block), join pieces at the named place along the
least-cost path within limits, and say why when nothing is done."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from neurorefiner.defects import betti0
from neurorefiner.errors import InputError
from neurorefiner.inference.decoding import (
    NO_OUTSIDE,
    DecodingConfig,
    decode,
    decode_remove,
    grow,
    outside_contact,
    raw_decode,
)
from neurorefiner.inference.refiner import TopoRefiner
from neurorefiner.models.text_encoders import HashingEncoder
from neurorefiner.models.toporefinenet import TopoRefineNet
from neurorefiner.topology.instructions import Instruction

SHAPE = (12, 30, 30)


def neurite(shape: tuple[int, int, int] = SHAPE, y: int = 15, z: int = 6) -> np.ndarray:
    """A straight neurite along x through the whole block, 1 slice thick in z and 3 rows in y."""
    m = np.zeros(shape, bool)
    m[z, y - 1:y + 2, :] = True
    return m


def test_remove_keeps_a_neurite_crossing_the_cell_that_raw_decoding_cuts():
    true = neurite()
    noisy = true.copy()
    noisy[5:8, 10:12, 13:16] = True  # a blob in the centre cell, apart from the neurite
    ins = Instruction("remove", "center-center-center")
    prob = np.zeros(SHAPE, np.float32)  # the network rejects everything at the named place
    region = ins.region(SHAPE)
    raw = raw_decode(noisy, prob, grow(region, 4), 0.5)
    assert betti0(raw.mask) > betti0(true)  # the old decoding cuts the neurite
    res = decode(noisy, prob, None, ins)
    assert np.array_equal(res.mask, true)
    assert res.changed and res.removed_voxels == 18 and res.removed_pieces == 1
    assert "continue beyond" in res.reason


def test_remove_keeps_a_piece_that_leaves_the_block_and_removes_it_when_the_halo_is_empty():
    mask = np.zeros(SHAPE, bool)
    mask[6, 14:17, 0:6] = True  # touches the left face
    ins = Instruction("remove", "center-left-center")
    prob = np.zeros(SHAPE, np.float32)
    assert not decode(mask, prob, None, ins).changed  # unknown outside: may continue, kept
    halo = np.zeros(tuple(s + 4 for s in SHAPE), bool)
    halo[2:-2, 2:-2, 2:-2] = mask
    continued = halo.copy()
    continued[8, 16:19, 0:2] = True  # the neurite continues to the left of the block
    assert not decode(mask, prob, None, ins, context=continued).changed
    assert decode(mask, prob, None, ins, context=halo).removed_voxels == 18
    assert decode(mask, prob, None, ins, context=NO_OUTSIDE).removed_voxels == 18
    assert not decode(mask, prob, None, ins, context={"left": True}).changed
    # the image shows it and the network rejects it: still not trimmed back to the face
    assert not decode(mask, prob, mask.astype(np.float32), ins).changed
    with pytest.raises(ValueError, match="halo"):
        outside_contact(mask, np.zeros((13, 30, 30), bool))
    with pytest.raises(ValueError, match="faces"):
        outside_contact(mask, {"up": True})


def test_remove_only_what_the_network_rejects_and_say_why_when_nothing_is_removed():
    mask = neurite()
    mask[6, 3:6, 13:16] = True  # isolated blob in the top-center-center cell
    ins = Instruction("remove", "top-center-center")
    keep = decode(mask, mask.astype(np.float32), None, ins)  # the network keeps the blob
    assert not keep.changed and "marks them foreground" in keep.reason
    assert keep.declined  # the piece was there and the evidence kept it: a judgement, not a miss
    gone = decode(mask, np.zeros(SHAPE, np.float32), None, ins)
    assert gone.removed_voxels == 9 and np.array_equal(gone.mask, neurite()) and not gone.declined
    empty = decode(neurite(), np.zeros(SHAPE, np.float32), None, Instruction("remove", "top-left-front"))
    assert not empty.changed and "nothing to remove" in empty.reason and not empty.declined


def test_remove_trims_a_blob_stuck_to_a_neurite_but_not_the_neurite_flank():
    true = neurite()
    noisy = true.copy()
    noisy[5:8, 9:14, 13:18] = True  # blob stuck to the neurite's upper flank (rows 14-16)
    ins = Instruction("remove", "center-center-center")
    prob = np.where(noisy & ~true, 0.0, 1.0).astype(np.float32)
    prob[6, 14, 10:20] = 0.0  # the network also rejects a flank row of the true neurite
    image = true.astype(np.float32)  # the image shows the neurite, not the blob
    res = decode_remove(noisy, prob, ins.region(SHAPE), context=NO_OUTSIDE, image=image)
    assert res.changed and betti0(res.mask) == 1
    assert not (true & ~res.mask).any()  # no true voxel lost
    assert (noisy & ~true & ~res.mask).sum() >= 0.6 * (noisy & ~true).sum()  # most of the blob is gone


def broken(gap: tuple[int, int] = (12, 18)) -> tuple[np.ndarray, np.ndarray]:
    true = neurite()
    cut = true.copy()
    cut[:, :, gap[0]:gap[1]] = False
    return true, cut


def test_repair_joins_the_break_along_the_bright_path_where_raw_decoding_leaves_it_open():
    true, cut = broken()
    image = true.astype(np.float32) * 0.8
    prob = cut.astype(np.float32)  # a network that does not fill the gap
    ins = Instruction("repair", "center-center-center")
    raw = raw_decode(cut, prob, grow(ins.region(SHAPE), 4), 0.5)
    assert betti0(raw.mask) == 2
    res = decode(cut, prob, image, ins)
    assert res.changed and betti0(res.mask) == 1 and "joined 1 gap" in res.reason
    gap = true & ~cut
    assert (res.mask & gap).sum() >= 0.9 * gap.sum()  # the gap, at the neurite's own thickness
    assert not (res.mask & ~grow(true, 1)).any()  # at most a voxel beyond the neurite
    assert res.joins[0].length == 6 and res.joins[0].painted and not res.declined


def test_repair_leaves_a_dark_or_long_gap_unchanged_with_the_reason():
    _, cut = broken()
    ins = Instruction("repair", "center-center-center")
    dark = decode(cut, np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32), ins)
    assert not dark.changed and np.array_equal(dark.mask, cut) and "darkness" in dark.reason
    assert dark.declined
    _, long_cut = broken((4, 26))
    long = decode(long_cut, np.ones(SHAPE, np.float32), None, Instruction("repair", "center-center-center"),
                  config={"connect_margin": 10, "max_gap_voxels": 10})
    assert not long.changed and "gap 22 voxels > 10" in long.reason and long.declined
    nothing = decode(neurite(), np.ones(SHAPE, np.float32), None, Instruction("repair", "center-center-center"))
    assert not nothing.changed and not nothing.declined  # one piece at the place: nothing was judged


def test_a_short_dark_gap_is_bridged_within_short_gap_voxels_and_a_longer_one_is_not():
    """The 6-voxel dark gap that max_darkness refuses is painted once short_gap_voxels reaches it; a
    10-voxel dark gap stays open under the same setting (it must be bright to be bridged)."""
    dark = np.zeros(SHAPE, np.float32)
    ins = Instruction("repair", "center-center-center")
    _, cut = broken()
    res = decode(cut, dark, dark, ins, config={"short_gap_voxels": 6})
    assert res.changed and betti0(res.mask) == 1
    _, wide = broken((10, 20))
    res = decode(wide, dark, dark, ins, config={"short_gap_voxels": 6})
    assert not res.changed and "darkness" in res.reason and "over 10 voxels" in res.reason
    with pytest.raises(ValueError, match="short_gap_voxels"):
        decode(cut, dark, dark, ins, config={"short_gap_voxels": -1})


def test_repair_never_joins_pieces_the_named_place_does_not_touch():
    _, cut = broken()
    bright = np.ones(SHAPE, np.float32)
    res = decode(cut, bright, bright, Instruction("repair", "top-left-front"))
    assert not res.changed and "nothing to connect" in res.reason
    one = decode(neurite(), bright, bright, Instruction("repair", "center-center-center"))
    assert not one.changed and "one component" in one.reason


def test_pieces_joined_outside_the_block_are_not_joined_again():
    _, cut = broken()
    mask = cut.copy()
    mask[0:7, 15, 0] = mask[0:7, 15, 29] = True  # both pieces run to the front face
    ins = Instruction("repair", "center-center-center")
    bright = np.ones(SHAPE, np.float32)
    halo = np.zeros(tuple(s + 4 for s in SHAPE), bool)
    halo[2:-2, 2:-2, 2:-2] = mask
    assert decode(mask, bright, bright, ins, context=halo).changed  # apart outside too: joined
    halo[1, 2 + 15, 2:-2] = True  # one fibre in front of the block joins both pieces
    res = decode(mask, bright, bright, ins, context=halo)
    assert not res.changed and "joined outside the block" in res.reason


def test_connect_from_a_to_b_joins_a_piece_at_each_end():
    true, cut = broken((8, 22))
    image = true.astype(np.float32)
    ins = Instruction("connect", "center-left-center", "center-right-center")
    res = decode(cut, cut.astype(np.float32), image, ins, config={"max_gap_voxels": 20})
    assert res.changed and betti0(res.mask) == 1


def test_decoding_config_rejects_bad_settings():
    with pytest.raises(ValueError, match="threshold"):
        DecodingConfig(threshold=1.5)
    with pytest.raises(ValueError, match="unknown decoding settings"):
        DecodingConfig.build({"tube": 3})
    with pytest.raises(ValueError, match="shapes differ"):
        decode(neurite(), np.zeros((2, 2, 2)), None, Instruction("repair", "top-left-front"))


class _Remover(torch.nn.Module):
    """A stand-in network that calls every voxel background (the raw network that cuts neurites)."""

    spatial_dims, text_dim, region_channel, min_size = 3, 16, True, 8

    def forward(self, image, mask, emb, region=None):
        return torch.cat([torch.ones_like(image), -torch.ones_like(image)], dim=1)

    @staticmethod
    def probabilities(logits):
        return torch.softmax(logits, dim=1)[:, 1:2]


def test_refiner_default_decoding_keeps_the_crossing_neurite_and_raw_cuts_it():
    mask = neurite()
    img = mask.astype(np.float32)
    ins = "Remove isolated noise at center-center-center"
    raw = TopoRefiner(_Remover(), HashingEncoder(dim=16), decoding="raw").edit(img, mask, ins)
    assert betti0(raw) == 2
    topo = TopoRefiner(_Remover(), HashingEncoder(dim=16))
    out = topo.edit(img, mask, ins)
    assert out.dtype == bool and np.array_equal(out, mask)
    assert "continue beyond" in topo.edit_result(img, mask, ins).reason
    with pytest.raises(ValueError, match="decoding"):
        TopoRefiner(_Remover(), HashingEncoder(dim=16), decoding="magic")
    with pytest.raises(InputError, match="halo"):
        topo.edit_result(img, mask, ins, context=np.zeros((3, 3, 3), bool))


def test_a_block_smaller_than_the_network_minimum_is_padded():
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8, 16, 32), text_dim=16)  # needs blocks of 16 voxels per axis
    r = TopoRefiner(net, HashingEncoder(dim=16))
    for shape in [(1, 5, 5), (3, 4, 7)]:
        mask = np.zeros(shape, bool)
        mask[0, 1, :] = True
        res = r.edit_result(np.zeros(shape, np.float32), mask, "Repair break at center-center-center")
        assert res.mask.shape == shape and not res.changed and res.reason


def test_edit_command_decodes_by_default_and_raw_on_request(tmp_path):
    from neurorefiner.cli.main import app
    from neurorefiner.io import read_mask, write_volume

    net_cfg = {"_target_": "neurorefiner.models.toporefinenet.TopoRefineNet", "channels": [4, 8], "text_dim": 16}
    te_cfg = {"_target_": "neurorefiner.models.text_encoders.HashingEncoder", "dim": 16}
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    ckpt = tmp_path / "t.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in net.state_dict().items()},
                "hyper_parameters": {"net_config": net_cfg, "text_encoder_config": te_cfg, "stage": 1}}, ckpt)
    mask = neurite()
    write_volume(tmp_path / "img.tif", (mask * 200).astype(np.uint8))
    write_volume(tmp_path / "mask.tif", mask)
    args = ["edit", str(tmp_path / "img.tif"), str(tmp_path / "mask.tif"), "--instruction",
            "Remove isolated noise at center-center-center", "--checkpoint", str(ckpt)]
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a.tif")])
    assert res.exit_code == 0, res.output
    assert "topology decoding:" in res.output
    assert np.array_equal(read_mask(tmp_path / "a.tif").load(), mask)
    res = CliRunner().invoke(app, [*args, "--raw", "--out", str(tmp_path / "b.tif")])
    assert res.exit_code == 0 and "raw decoding:" in res.output


def test_a_bridge_next_to_a_soma_is_painted_at_the_neurite_radius_not_the_soma_radius():
    true, cut = broken()
    soma = np.zeros(SHAPE, bool)
    soma[2:11, 6:25, 2:12] = True  # a thick body right at one end of the gap
    mask = cut | soma
    image = (true | soma).astype(np.float32)
    res = decode(mask, mask.astype(np.float32), image, Instruction("repair", "center-center-center"))
    assert res.changed and all(r <= DecodingConfig().max_radius for r in res.joins[0].radii)
    assert res.added_voxels <= 7 * 7 * 9


def test_a_sliver_left_in_the_gap_is_attached_to_the_bridge():
    # a neurite cut over x 10-19, with a 2-voxel sliver of a side branch left four rows off the line
    true = np.zeros(SHAPE, bool)
    true[6, 15, :] = True
    true[6, 15:20, 14:16] = True
    cut = true.copy()
    cut[6, 15, 10:20] = False
    cut[6, 15:19, 14:16] = False  # the sliver is what is left: (6, 19, 14:16)
    assert betti0(cut) == 3
    image = true.astype(np.float32) * 0.8
    ins = Instruction("repair", "center-center-center")
    res = decode(cut, cut.astype(np.float32), image, ins, {"absorb_gap": 3})
    assert betti0(res.mask) == 1 and "attached 1 piece" in res.reason
    off = decode(cut, cut.astype(np.float32), image, ins)
    assert betti0(off.mask) == 2  # the sliver is no join target (too small): left alone without absorbing
    # nothing was bridged: nothing is attached either
    lone = decode(cut, cut.astype(np.float32), np.zeros(SHAPE, np.float32), ins,
                  {"max_darkness": 0.0, "absorb_gap": 3})
    assert not lone.changed


def test_a_removal_no_network_output_could_make_skips_the_network():
    """A bright isolated piece (kept by the brightness gate whatever the network says) and a neurite that
    continues beyond the named place: the refiner answers without running its network, with the same
    mask the network pass would give; a dim isolated speck still goes through the network."""
    from neurorefiner.inference.decoding import remove_decided_without_network

    class CountingNet(TopoRefineNet):
        calls = 0

        def forward(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            CountingNet.calls += 1
            return super().forward(*args, **kwargs)

    torch.manual_seed(0)
    refiner = TopoRefiner(CountingNet(channels=(4, 8), text_dim=16), HashingEncoder(dim=16))
    mask = neurite()
    speck = np.zeros(SHAPE, bool)
    speck[6, 10:12, 14:16] = True             # isolated (three rows from the neurite), in the centre cell
    image = mask.astype(np.float32) * 0.8
    ins = "Remove isolated noise at center-center-center"
    bright = image.copy()
    bright[speck] = 0.8
    res = refiner.edit_result(bright, mask | speck, ins, context=dict.fromkeys(("front", "rear", "top", "bottom",
                                                                                "left", "right"), True))
    assert CountingNet.calls == 0 and not res.changed and "without a network pass" in res.reason
    assert remove_decided_without_network(mask | speck, image, Instruction("remove", "center-center-center")) is None
    refiner.edit_result(image, mask | speck, ins)
    assert CountingNet.calls == 1


BLOCK = (32, 64, 64)


def tube(axis: int, cut: int, shape: tuple[int, int, int] = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """A straight 3x3 tube along ``axis`` through the block's centre and the same tube with a ``cut``-voxel
    gap centred in the block."""
    true = np.zeros(shape, bool)
    centre = [s // 2 for s in shape]
    box = [slice(c - 1, c + 2) for c in centre]
    box[axis] = slice(None)
    true[tuple(box)] = True
    gap = [slice(None)] * 3
    gap[axis] = slice(centre[axis] - cut // 2, centre[axis] - cut // 2 + cut)
    broken = true.copy()
    broken[tuple(gap)] = False
    return true, broken


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_repair_at_the_gap_of_a_centred_nine_voxel_cut_joins_it(axis: int):
    """'Repair break at center-center-center' pointing at a 9-voxel cut in the block's centre, the network
    filling nothing and the image bright along the tube: one piece after."""
    true, cut = tube(axis, 9)
    assert betti0(cut) == 2
    res = decode(cut, np.zeros(BLOCK, np.float32), true.astype(np.float32),
                 Instruction("repair", "center-center-center"))
    assert res.changed and betti0(res.mask) == 1 and "joined 1 gap" in res.reason


def test_repair_at_a_gap_that_fills_the_cell_finds_the_ends_within_reach():
    """A 22-voxel cut along z fills the centre cell (z 11-20) and leaves both ends 7 voxels beyond it,
    outside the usual room (connect_margin 6): the ends are looked for up to connect_reach and joined;
    with connect_reach at connect_margin (no such search) nothing is done, as before."""
    true, cut = tube(0, 22)
    dark, bright = np.zeros(BLOCK, np.float32), true.astype(np.float32)
    ins = Instruction("repair", "center-center-center")
    res = decode(cut, dark, bright, ins)
    assert res.changed and betti0(res.mask) == 1 and res.joins[0].length == 22
    assert not (res.mask & ~grow(true, 1)).any()
    old = decode(cut, dark, bright, ins, config={"connect_reach": 6})
    assert not old.changed and "nothing to connect" in old.reason


def test_repair_within_reach_still_joins_no_pieces_far_apart_or_beside_the_cell():
    """Pieces within reach but a 40-voxel gap apart stay apart (over max_gap_voxels), pieces beyond reach
    are not looked for, and two pieces that do not face each other across the named cell are not joined."""
    ins = Instruction("repair", "center-center-center")
    for gap in (40, 50):
        true, cut = tube(2, gap)
        res = decode(cut, np.zeros(BLOCK, np.float32), true.astype(np.float32), ins)
        assert not res.changed and np.array_equal(res.mask, cut), gap
    side = np.zeros(BLOCK, bool)
    side[15:18, 27:30, 0:13] = side[15:18, 35:38, 0:13] = True  # two ends 9 voxels left of the cell, side by side
    beside = decode(side, np.ones(BLOCK, np.float32), side.astype(np.float32), ins)
    assert not beside.changed and "nothing to connect" in beside.reason


def test_repair_at_the_gap_centre_joins_the_sliver_a_cut_left_in_it():
    """The cut case: 'Repair break at P', P the gap's centre, where the cut left a sliver of neurite in the gap
    (three pieces). Bridging only the two long ends left the sliver apart (block Betti-0 2 after, as the
    input's two long pieces); a sliver the network keeps is a join target, one it removes is not."""
    true, cut = tube(2, 16)
    sliver = np.zeros(BLOCK, bool)
    sliver[15:18, 37:40, 30:33] = True       # 3 x 3 x 3 voxels in the 16-voxel gap, beside the straight bridge
    true = true | sliver
    mask = cut | sliver
    assert betti0(mask) == 3
    ins = Instruction("repair", "center-center-center")
    bright = true.astype(np.float32)
    bright[15:18, 33:37, 30:33] = 1.0        # the image shows the sliver's link to the neurite
    keeps = mask.astype(np.float32)          # a network that keeps every piece and fills nothing
    res = decode(mask, keeps, bright, ins)
    assert res.changed and betti0(res.mask) == 1
    before = decode(mask, keeps, bright, ins, config={"max_sliver": 0})
    assert betti0(before.mask) == 2         # the fault: the sliver was no join target
    rejects = np.where(sliver, 0.0, keeps).astype(np.float32)
    assert betti0(decode(mask, rejects, bright, ins).mask) == 2


def test_repair_at_a_cut_near_a_tip_joins_the_short_stub_it_left():
    """A neurite ending 8 voxels past the block's centre, cut there by 9 voxels, leaves a 36-voxel
    stub: inside the room, off the block's border, not elongated, too large for a sliver. The shape test took it
    for a blob of noise and the repair said 'one component at the named place'; the person named the break,
    so the stub is its other end. A speck (under min_piece) is still no end."""
    true = np.zeros(BLOCK, bool)
    true[15:18, 31:34, 0:41] = True          # a 3 x 3 tube along x that ends at x 40
    cut = true.copy()
    cut[:, :, 28:37] = False                 # the 9-voxel cut centred in the block: x 0-27 and the stub x 37-40
    assert betti0(cut) == 2 and (cut[:, :, 37:]).sum() == 36
    ins = Instruction("repair", "center-center-center")
    res = decode(cut, np.zeros(BLOCK, np.float32), true.astype(np.float32), ins)
    assert res.changed and betti0(res.mask) == 1 and "joined 1 gap" in res.reason, res.reason
    assert not (res.mask & ~grow(true, 2)).any()     # along the neurite, not towards anything else
    speck = cut.copy()
    speck[:, :, 37:] = False
    speck[16, 32, 37] = True                 # one voxel of the stub left: a speck
    one = decode(speck, np.zeros(BLOCK, np.float32), true.astype(np.float32), ins)
    assert not one.changed and "one component" in one.reason


def test_the_network_fill_is_kept_where_it_joins_pieces_and_dropped_where_it_joins_nothing():
    """A network that fills the gap decides the join even where the image is dark; its fill elsewhere that
    joins no two pieces is not kept (the decoding cleans up)."""
    true, cut = tube(2, 8)
    prob = true.astype(np.float32)
    stray = np.zeros(BLOCK, bool)
    stray[16, 26:28, 30:34] = True           # foreground the network adds beside the neurite, joining nothing
    prob[stray] = 0.9
    dark = np.zeros(BLOCK, np.float32)
    res = decode(cut, prob, dark, Instruction("repair", "center-center-center"))
    assert res.changed and betti0(res.mask) == 1 and "network's fill" in res.reason
    assert not (res.mask & stray).any() and (res.mask & true & ~cut).sum() == (true & ~cut).sum()
    off = decode(cut, prob, dark, Instruction("repair", "center-center-center"), config={"network_fill": False})
    assert "network's fill" not in off.reason


def test_operation_gate_keeps_a_remove_from_filling_and_a_repair_from_erasing():
    """The raw network, told to remove noise at a break, filled the gap in the editor probe (the opposite
    instruction left only 7 % of blocks unchanged); gated by its operation it may only delete."""
    from neurorefiner.inference.refiner import gate_by_operation

    mask = np.zeros((1, 1, 4), bool)
    mask[..., :2] = True
    prob = np.array([[[0.2, 0.9, 0.8, 0.1]]], np.float32)   # erases voxel 0, fills voxel 2
    removed = gate_by_operation(prob, mask, "remove") > 0.5
    added = gate_by_operation(prob, mask, "repair") > 0.5
    assert removed.tolist() == [[[False, True, False, False]]]   # the erasure stays, the fill does not
    assert added.tolist() == [[[True, True, True, False]]]        # the fill stays, the erasure does not
    assert np.array_equal(gate_by_operation(prob, mask, "connect"), gate_by_operation(prob, mask, "repair"))
    mask3 = neurite()
    img = mask3.astype(np.float32)
    ins = "Repair break at center-center-center"
    plain = TopoRefiner(_Remover(), HashingEncoder(dim=16), decoding="raw").edit(img, mask3, ins)
    assert (mask3 & ~plain).any()                       # the network alone erases the neurite it should mend
    gated = TopoRefiner(_Remover(), HashingEncoder(dim=16), decoding="raw", operation_gate=True)
    assert np.array_equal(gated.edit(img, mask3, ins), mask3)
