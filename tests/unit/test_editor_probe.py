"""The editor probe: defects of every kind, per-edit figures that mean what the table says, and a report
with date and commit; development data only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from neurorefiner.defects import betti0
from neurorefiner.evaluation.tables import utc_now
from neurorefiner.inference.refiner import TopoRefiner
from neurorefiner.models.text_encoders import HashingEncoder
from neurorefiner.studies import editor_probe as ep
from neurorefiner.studies import editor_probe_real as real_defects
from neurorefiner.studies import editor_probe_report as report
from neurorefiner.topology.instructions import Instruction


def lines_volume(shape: tuple[int, int, int] = (24, 96, 96)) -> ep.ProbeVolume:
    """Two neurites (along x and along y) in a small volume, the image bright where they are."""
    gold = np.zeros(shape, bool)
    gold[12, 30:33, :] = True
    gold[8, :, 60:63] = True
    return ep.ProbeVolume("lines", gold.astype(np.float32), gold, np.flatnonzero(gold))


class _KeepMask(torch.nn.Module):
    """A stand-in network that keeps the input mask (probability = mask)."""

    spatial_dims, text_dim, region_channel = 3, 16, True

    def forward(self, image, mask, emb, region=None):
        return torch.cat([-4 * (2 * mask - 1), 4 * (2 * mask - 1)], dim=1)

    @staticmethod
    def probabilities(logits):
        return torch.softmax(logits, dim=1)[:, 1:2]


@pytest.mark.parametrize("kind", ep.GENERATED)
def test_items_of_every_kind_hold_their_defect_and_context(kind):
    vol = lines_volume()
    items = ep.make_items([vol], n_per_kind=3, kinds=[kind], size=(16, 48, 48), seed=0)
    assert len(items) == 3
    for it in items:
        assert it.kind == kind and it.mask.shape == it.gold.shape == it.image.shape == (16, 48, 48)
        assert (it.mask != it.gold).any()
        assert it.context.shape == (20, 52, 52) and np.array_equal(it.context[2:-2, 2:-2, 2:-2], it.mask)
        if kind == "break":
            assert betti0(it.mask) > betti0(it.gold) and it.instruction.op in ("repair", "connect")
        else:
            assert (it.mask & ~it.gold).any() and it.instruction.op == "remove"


def test_crossing_noise_names_a_place_that_a_true_neurite_crosses():
    from neurorefiner.inference.decoding import grow

    gold = lines_volume().gold[4:20, 10:58, 40:88]
    for seed in range(5):
        d = ep.crossing_noise(gold, np.random.default_rng(seed))
        assert d is not None and d.kind == "crossing"
        region = d.instruction.region(gold.shape)
        assert (gold & region).any() and (gold & ~grow(region, 4)).any()


def test_edit_metrics_on_hand_made_edits():
    gold = np.zeros((16, 48, 48), bool)
    gold[12, 30:33, :] = True
    gold[8, :, 40:43] = True
    cut = gold.copy()
    cut[12, 30:33, 20:26] = False
    item = ep.ProbeItem("v", "break", (0, 0, 0), gold.astype(np.float32), gold, cut,
                        Instruction("repair", "center-center-center"), np.zeros((20, 52, 52), bool))
    m = ep.edit_metrics(item, gold)
    assert m["reconnected"] and m["gap_filled"] == 1.0 and m["true_removed"] == 0 and not m["false_merge"]
    half = cut.copy()
    half[12, 30:33, 20:23] = True
    m = ep.edit_metrics(item, half)
    assert not m["reconnected"] and m["gap_filled"] == 0.5 and m["changed"]
    # a bridge between the two gold neurites is a false merge; cutting one removes true structure
    merged = gold.copy()
    merged[8:13, 31, 41] = True
    assert ep.edit_metrics(item, merged)["false_merge"]
    assert ep.edit_metrics(item, cut & ~gold)["true_removed"] == int(cut.sum())


def test_probe_summary_and_report(tmp_path: Path):
    vol = lines_volume()
    items = ep.make_items([vol], n_per_kind=1, kinds=["break", "noise"], size=(16, 48, 48), seed=1)
    refiner = TopoRefiner(_KeepMask(), HashingEncoder(dim=16))
    rows = ep.probe(refiner, items)
    assert len(rows) == len(items) * 4 * 3
    assert {r["decoding"] for r in rows} == {"raw", "network", "topology"}
    assert {r["variant"] for r in rows} == {"correct", "constant", "wrong_location", "opposite"}
    constant = {r["instruction"] for r in rows if r["variant"] == "constant"}
    assert constant == {"Repair break at center-center-center", "Remove isolated noise at center-center-center"}
    summary = ep.summarize(rows)
    raw_breaks = next(s for s in summary if (s["kind"], s["variant"], s["decoding"]) == ("break", "correct", "raw"))
    assert raw_breaks["reconnected"] == 0.0 and raw_breaks["unchanged"] == 1.0  # the stand-in keeps the mask
    meta = {"date": utc_now(), "commit": "abc1234", "command": "neurorefiner study probe-editor", "data": "lines",
            "size": (16, 48, 48), "n_per_kind": 1, "kinds": ["break", "noise"], "seed": 1, "checkpoint": "-",
            "decoding_config": {}}
    speed = {"raw_s": 1.0, "crop_s": 0.3, "decoded_s": 0.4, "ratio": 0.4, "crop_ratio": 0.3, "load_before": 9.5,
             "load_after": 9.0, "shape": "64 x 128 x 128", "threads": 2, "repeats": 3}
    paths = report.write_report(tmp_path, rows, summary, meta, speed)
    md = (tmp_path / "editor_probe.md").read_text()
    assert "abc1234" in md and "breaks reconnected" in md
    assert "right minus constant instruction: break gap filled (raw) | 0.000 |" in md
    assert "| network pass, crop around the named place | 0.30 |" in md and "load average 9.5" in md
    assert "abc1234" in (tmp_path / "editor_probe.csv").read_text().splitlines()[1]
    assert len(paths) == 3


def test_time_edit_measures_whole_block_crop_and_decoded_edit():
    vol = lines_volume()
    item = ep.make_items([vol], n_per_kind=1, kinds=["break"], size=(16, 48, 48), seed=1)[0]
    refiner = TopoRefiner(_KeepMask(), HashingEncoder(dim=16))
    t = ep.time_edit(refiner, item.image, item.mask, item.instruction, context=item.context, repeats=1)
    for key in ("raw_s", "crop_s", "decoded_s", "raw_cpu_s", "crop_ratio", "ratio", "load_before"):
        assert key in t and t[key] >= 0


def test_probe_refuses_the_held_out_stacks():
    with pytest.raises(ValueError, match="held-out"):
        ep.load_diadem(["OP_6", "OP_7"])
    from neurorefiner.cli.main import app

    res = CliRunner().invoke(app, ["study", "probe-editor", "--stacks", "OP_9", "--synthetic", ""])
    assert res.exit_code == 2 and "held-out" in res.output


def test_real_defects_are_the_segmenters_breaks_and_noise_put_into_gold_one_at_a_time():
    vol = lines_volume()
    seg = vol.gold.copy()
    seg[12, 30:33, 20:26] = False  # the segmenter misses a stretch: its mask is in two pieces there
    seg[8, 40:60, 61] = False  # misses the middle of a neurite's width only: no break
    seg[18:21, 70:73, 20:23] = True  # and finds a blob away from gold
    found = real_defects.find_real_defects(vol, seg)
    kinds = [k for k, _ in found]
    assert kinds.count("real_break") == 1 and kinds.count("real_noise") == 1
    brk = next(v for k, v in found if k == "real_break")
    assert set(np.unravel_index(brk, vol.gold.shape)[2]) == set(range(20, 26))
    items = real_defects.real_items([vol], {"lines": seg}, n_per_kind=5, size=(16, 48, 48), seed=0)
    assert [it.kind for it in items] == ["real_break", "real_noise"]
    b, n = items
    assert betti0(b.mask) > betti0(b.gold) and b.instruction.op in ("repair", "connect")
    assert int((b.gold & ~b.mask).sum()) == 18 and not (b.mask & ~b.gold).any()
    assert int((n.mask & ~n.gold).sum()) == 27 and n.instruction.op == "remove"
    assert np.array_equal(n.context[2:-2, 2:-2, 2:-2], n.mask)
    summary = ep.summarize(ep.probe(TopoRefiner(_KeepMask(), HashingEncoder(dim=16)), items))
    key = ("real_break", "correct", "raw")
    real_break = next(s for s in summary if (s["kind"], s["variant"], s["decoding"]) == key)
    assert real_break["reconnected"] == 0.0 and real_break["gap_filled"] == 0.0


def test_real_defects_never_come_from_the_held_out_stacks():
    vol = lines_volume()
    vol.name = "OP_8"
    with pytest.raises(ValueError, match="held-out"):
        real_defects.load_segmenter_masks([vol])
