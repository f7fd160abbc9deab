"""Sample shards: written once in parallel, read back under the batch contract, instructions rewritten
from the stored change, hard negatives asking for no change, balanced by operation; stage-2 errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from neurorefiner.data.datamodules.stage1 import BATCH_KEYS, GoldVolume, Stage1DefectDataModule
from neurorefiner.data.sample_shards import (
    MixedDataset,
    ShardDataset,
    ShardSettings,
    describe_sample,
    instruction_for,
    write_shards,
    writer_version,
)
from neurorefiner.data.shard_makers import find_errors, stage1_record, stage2_record
from neurorefiner.errors import InputError
from neurorefiner.topology.instructions import parse_instruction
from tests.unit.test_stage1_data import neuron_volume

CROP = (16, 32, 32)


@dataclass
class Volumes:
    """A picklable loader of two small gold volumes (what make_shards' workers call once)."""

    shape: tuple = (24, 48, 48)

    def __call__(self) -> list[GoldVolume]:
        out = []
        for seed in (0, 1):
            image, gold = neuron_volume(seed, self.shape)
            gold = gold > 0
            out.append(GoldVolume(f"v{seed}", image, gold, np.flatnonzero(gold)))
        return out


def _settings(**kw) -> ShardSettings:
    base = {"stage": 1, "crop_size": CROP, "op_shares": {"connect": 0.5, "remove": 0.5, "cut": 0.0},
            "variant_shares": {"correct": 0.5, "wrong_place": 0.25, "opposite": 0.25}, "distractor_prob": 0.0}
    return ShardSettings(**{**base, **kw})


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shards")
    for part, n in (("train", 12), ("val", 6)):
        write_shards(root / part, Volumes(), stage1_record, _settings(seed=0 if part == "train" else 1), n,
                     shard_size=4, workers=2 if part == "train" else 1, sources=["v0", "v1"], progress=False)
    return root


def test_manifest_counts_and_writer_version(shards: Path) -> None:
    m = json.loads((shards / "train" / "manifest.json").read_text())
    assert m["n_samples"] == 12 and m["sizes"] == [4, 4, 4] and len(m["shards"]) == 3
    assert m["writer_version"] == writer_version() and m["writer_version"].startswith("describe@")
    assert sum(v for k, v in m["counts"].items() if k.startswith("op:")) == 12
    assert set(k for k in m["counts"] if k.startswith("op:")) <= {"op:connect", "op:remove"}  # cut share 0


def test_items_keep_the_batch_contract_and_variants(shards: Path) -> None:
    ds = ShardDataset(shards / "train", augment=True)
    assert len(ds) == 12
    for i in range(len(ds)):
        s = ds.sample(i, np.random.default_rng(i))
        assert s["image"].shape == CROP and s["image"].dtype == np.float32
        assert 0 <= s["image"].min() <= s["image"].max() <= 1
        parse_instruction(s["instruction"])
        assert s["region"].any()
        if s["variant"] == "correct":
            assert (s["mask"] != s["target"]).any()
            # the named edit lies where the instruction points
            assert ((s["mask"] ^ s["target"]) & s["region"]).any()
        else:
            assert (s["mask"] == s["target"]).all()  # hard negative: no change
    item = ds[0]
    assert set(BATCH_KEYS) <= set(item) and item["image"].shape == (1, *CROP) and item["region"].dtype == torch.bool


def test_wrong_place_names_a_place_without_edits(shards: Path) -> None:
    ds = ShardDataset(shards / "train", augment=False)
    rec = next(ds.record(i) for i in range(len(ds)) if ds.meta[i]["variant"] == "correct")
    correct, _ = instruction_for(rec, "correct", np.random.default_rng(0))
    wrong, target = instruction_for(rec, "wrong_place", np.random.default_rng(0))
    opposite, target2 = instruction_for(rec, "opposite", np.random.default_rng(0))
    assert wrong.op == correct.op and not (wrong.region(CROP) & (rec["mask"] ^ rec["target"])).any()
    assert opposite == correct.opposite()
    assert (target == rec["mask"]).all() and (target2 == rec["mask"]).all()


def test_instructions_are_rewritten_from_the_change(shards: Path) -> None:
    """The stored text is what the writer of the day said; the reader writes it anew from the change (so a
    new writer needs no new shards) and, with redescribe off, reads the stored text mirrored with the crop."""
    ds = ShardDataset(shards / "train", augment=False)
    for i in range(len(ds)):
        rec = ds.record(i)
        again = describe_sample(rec["change"], rec["side"], rec["attached"], rec["target"])
        assert again.format() == rec["instruction"]
    flipped = ShardDataset(shards / "train", augment=True, redescribe=False)
    s = flipped.sample(0, np.random.default_rng(3))
    parse_instruction(s["instruction"])


def test_interrupted_run_continues_and_other_settings_are_refused(shards: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    write_shards(out, Volumes(), stage1_record, _settings(), 4, shard_size=2, workers=1, progress=False)
    first = (out / "shard-00000" / "image.npy").stat().st_mtime_ns
    import shutil

    shutil.rmtree(out / "shard-00001")
    write_shards(out, Volumes(), stage1_record, _settings(), 4, shard_size=2, workers=1, progress=False)
    assert (out / "shard-00000" / "image.npy").stat().st_mtime_ns == first  # kept
    assert (out / "shard-00001" / "samples.json").exists()  # remade
    with pytest.raises(InputError, match="other settings"):
        write_shards(out, Volumes(), stage1_record, _settings(seed=5), 4, shard_size=2, workers=1, progress=False)


def test_missing_shards_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="make-shards"):
        ShardDataset(tmp_path)


def test_stage1_datamodule_reads_shards(shards: Path) -> None:
    dm = Stage1DefectDataModule(dataset="unused", crop_size=CROP, batch_size=3, samples_per_epoch=6, val_samples=4,
                                shards=str(shards))
    batch = next(iter(dm.train_dataloader()))
    assert batch["image"].shape == (3, 1, *CROP) and len(batch["instruction"]) == 3
    val = dm.val_items()
    assert len(val) == 4 and [v["instruction"] for v in val] == [v["instruction"] for v in dm.val_items()]
    assert dm.train_volumes == []  # nothing loaded or synthesised


def test_mixed_dataset_draws_from_both(shards: Path) -> None:
    a, b = ShardDataset(shards / "train"), ShardDataset(shards / "val")
    mixed = MixedDataset([a, b], [0.5, 0.5], 10)
    assert len(mixed) == 10 and set(BATCH_KEYS) <= set(mixed[0]) and set(BATCH_KEYS) <= set(mixed[(0, 1, 2)])


def _segmenter_case() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A straight neurite and a side branch; the 'segmenter' misses a stretch of the neurite, adds a loose
    blob and a spur stuck to the neurite."""
    gold = np.zeros((24, 64, 64), bool)
    gold[12, 30:33, 4:60] = True
    mask = gold.copy()
    mask[12, 30:33, 28:36] = False  # break
    mask[10:14, 50:55, 10:15] = True  # loose blob
    mask[12, 33:45, 45:47] = True  # spur attached to the neurite
    image = gold.astype(np.float32) * 0.8
    return image, mask, gold


def test_stage2_errors_by_operation_and_sample() -> None:
    image, mask, gold = _segmenter_case()
    errors = find_errors(mask, gold, min_voxels=5)
    assert sorted({e.op for e in errors}) == ["connect", "cut", "remove"]

    @dataclass
    class Src:
        name: str
        image: np.ndarray
        mask: np.ndarray
        gold: np.ndarray
        errors: list

    src = [Src("x", image, mask, gold, errors)]
    for op in ("connect", "remove", "cut"):
        s = stage2_record(src, np.random.default_rng(0), _settings(stage=2, op_shares={op: 1.0}))
        assert s["op"] == op and s["change"].any()
        if op == "connect":
            assert (s["target"] & ~s["mask"]).sum() > 0 and not (s["mask"] & ~s["target"]).any()
            assert not (s["target"] & ~gold[tuple(slice(a, a + c) for a, c in zip(s["start"], CROP))]).any()
        else:
            assert (s["mask"] & ~s["target"]).sum() > 0 and not (s["target"] & ~s["mask"]).any()
        ins = describe_sample(s["change"], s["side"], s["attached"], s["target"])
        assert ins.op == ("remove" if op != "connect" else ins.op) and (ins.region(CROP) & s["change"]).any()


def test_stage2_datamodule_reads_shards_with_stage1_replay(shards: Path) -> None:
    from neurorefiner.data.datamodules.stage2 import Stage2MinedDataModule

    dm = Stage2MinedDataModule(dataset="unused", crop_size=CROP, batch_size=2, samples_per_epoch=4, shards=str(shards),
                               replay_shards=str(shards), replay_prob=0.5, val_samples=3)
    batch = next(iter(dm.train_dataloader()))
    assert batch["image"].shape == (2, 1, *CROP) and len(dm.val_items()) == 3 and dm.crops == []


def test_training_probe_headline_reads_the_summary() -> None:
    from neurorefiner.studies.editor_training_probe import headline

    summary = [{"kind": "break", "variant": "correct", "edits": 4, "unchanged": 0.0, "gap_filled": 0.5},
               {"kind": "real_break", "variant": "correct", "edits": 2, "unchanged": 0.5, "gap_filled": 0.25},
               {"kind": "break", "variant": "wrong_location", "edits": 4, "unchanged": 1.0, "gap_filled": 0.0},
               {"kind": "noise", "variant": "wrong_location", "edits": 4, "unchanged": 0.5, "gap_filled": None},
               {"kind": "break", "variant": "opposite", "edits": 4, "unchanged": 0.25, "gap_filled": 0.0}]
    h = list(headline(summary).values())
    assert h == [0.5, 0.25, 0.75, 0.25]


def test_training_probe_passes_feed_each_raw_result_back(monkeypatch) -> None:
    """A network that grows the mask one voxel a pass fills half of a 4-voxel gap in one pass and all of it
    in two: the second pass must see the first one's result, not the input again."""
    from scipy import ndimage as ndi

    from neurorefiner.inference import refiner as refiner_mod
    from neurorefiner.studies import editor_training_probe as probe
    from neurorefiner.studies.editor_probe import ProbeItem
    from neurorefiner.topology.instructions import parse_instruction

    class Growing:
        def probabilities(self, image, mask, ins, crop=True):
            return ndi.binary_dilation(mask > 0, structure=np.ones((1, 1, 3), bool)).astype(np.float32)

        def allowed_region(self, ins, shape):
            return np.ones(shape, bool)

    monkeypatch.setattr(refiner_mod.TopoRefiner, "load", classmethod(lambda cls, *a, **k: Growing()))
    gold = np.zeros((4, 4, 16), bool)
    gold[2, 2, 2:14] = True
    mask = gold.copy()
    mask[2, 2, 6:10] = False
    item = ProbeItem("v", "break", (0, 0, 0), gold.astype(np.float32), gold, mask,
                     parse_instruction("Repair break at center-center-center"), gold)
    one, two = (probe.score("x", [item], variants=("correct",), passes=n)[0] for n in (1, 2))
    assert one["gap_filled"] == 0.5 and two["gap_filled"] == 1.0 and two["passes"] == 2
    with pytest.raises(ValueError, match="passes"):
        probe.score("x", [item], passes=0)


def test_training_probe_cuts_one_pass_at_each_threshold(monkeypatch) -> None:
    """The raw output is cut at every threshold asked for, one row each, from the same network pass."""
    from neurorefiner.inference import refiner as refiner_mod
    from neurorefiner.studies import editor_training_probe as probe
    from neurorefiner.studies.editor_probe import ProbeItem
    from neurorefiner.topology.instructions import parse_instruction

    gold = np.zeros((4, 4, 16), bool)
    gold[2, 2, 2:14] = True
    mask = gold.copy()
    mask[2, 2, 6:10] = False
    calls = []

    class Ramp:  # the gap's voxels at probabilities 0.2, 0.4, 0.6, 0.8
        def probabilities(self, image, m, ins, crop=True):
            calls.append(1)
            p = m.astype(np.float32)
            p[2, 2, 6:10] = [0.2, 0.4, 0.6, 0.8]
            return p

        def allowed_region(self, ins, shape):
            return np.ones(shape, bool)

    monkeypatch.setattr(refiner_mod.TopoRefiner, "load", classmethod(lambda cls, *a, **k: Ramp()))
    item = ProbeItem("v", "break", (0, 0, 0), gold.astype(np.float32), gold, mask,
                     parse_instruction("Repair break at center-center-center"), gold)
    rows = probe.score("x", [item], variants=("correct",), thresholds=(0.3, 0.5, 0.7))
    assert [r["gap_filled"] for r in rows] == [0.75, 0.5, 0.25] and len(calls) == 1
    with pytest.raises(ValueError, match="thresholds"):
        probe.score("x", [item], thresholds=(1.5,))


def test_change_threshold_cuts_both_directions_and_is_the_plain_cut_at_one_half() -> None:
    from neurorefiner.inference.decoding import cut_change, raw_decode

    mask = np.array([True, True, False, False, True])
    prob = np.array([0.2, 0.45, 0.55, 0.8, 0.05], dtype=np.float32)
    allowed = np.array([True, True, True, True, False])
    half = cut_change(mask, prob, allowed, 0.5)
    assert half.tolist() == raw_decode(mask, prob, allowed, 0.5).mask.tolist() == [False, False, True, True, True]
    # at 0.7 only the confident changes are made: remove where p < 0.3, add where p >= 0.7
    assert cut_change(mask, prob, allowed, 0.7).tolist() == [False, True, False, True, True]


def test_training_probe_adds_stand_in_segmenters_real_breaks(monkeypatch) -> None:
    """--standin-segmenters: the stand-ins' own breaks on the SYNTHETIC probe stacks join OP_6's real defects."""
    from neurorefiner.studies import editor_training_probe as probe
    from neurorefiner.studies.editor_probe import ProbeVolume

    gold = np.zeros((32, 64, 64), bool)
    gold[16, 32, 4:60] = True
    gold[16, 4:60, 32] = True
    vol = ProbeVolume("synthetic_cwmbs_weak_0", gold * 0.8 + 0.1, gold, np.flatnonzero(gold))
    broken = gold.copy()
    broken[16, 32, 20:26] = False  # the segmenter missed six voxels of one branch
    asked = []
    monkeypatch.setattr(probe, "load_diadem", lambda names: [])
    monkeypatch.setattr(probe, "load_synthetic", lambda n, seed: [vol])
    monkeypatch.setattr(probe, "make_items", lambda *a, **k: [])
    monkeypatch.setattr(probe, "standin_masks", lambda vols, seg: asked.append(seg) or {vol.name: broken})
    items = probe.heldout_items(4, standin_segmenters=("unet3d",))
    assert asked == ["unet3d"] and [i.kind for i in items] == ["real_break"]
    assert probe.heldout_items(4) == [] and asked == ["unet3d"]


def test_faint_gap_dims_the_neurite_across_the_cut_only() -> None:
    from neurorefiner.defects.breaks import dim_gap

    gold = np.zeros((5, 5, 20), bool)
    gold[2, 2, 2:18] = True
    gap = np.zeros_like(gold)
    gap[2, 2, 8:12] = True
    image = np.where(gold, 0.9, 0.1).astype(np.float32)
    out = dim_gap(image, gold, gap, 0.25)
    assert np.allclose(out[gap], 0.1 + 0.25 * 0.8)  # contrast over the background (0.1) scaled
    assert np.array_equal(out[gold & ~gap], image[gold & ~gap])  # the kept neurite stays bright
    assert np.array_equal(dim_gap(image, gold, gap, 1.0), image)
    with pytest.raises(ValueError, match="contrast"):
        dim_gap(image, gold, gap, 1.5)


def test_faint_gap_shards_dim_breaks_and_old_folders_keep_their_stamp() -> None:
    """faint_gap=1: every break sample's gap is darker than its kept neurite; at 0 the settings stamp is the one
    folders made before the option existed hold (so they are not refused)."""
    vols = Volumes()()
    faint = _settings(op_shares={"connect": 1.0}, faint_gap=1.0, faint_contrast=(0.0, 0.0))
    plain = _settings(op_shares={"connect": 1.0})
    for settings, dark in ((faint, True), (plain, False)):
        rec = stage1_record(vols, np.random.default_rng(3), settings)
        img, gold, change = rec["image"], rec["target"], rec["change"]
        bg = float(np.median(img[~gold]))
        ratio = (img[change].mean() - bg) / (img[gold & ~change].mean() - bg)
        assert bool(ratio < 0.05) is dark, ratio
    assert "faint_gap" not in plain.stamp() and faint.stamp()["faint_gap"] == 1.0
    with pytest.raises(ValueError, match="faint"):
        _settings(faint_gap=2.0)


def test_mixed_opposites_name_one_of_the_two_places_with_the_opposite_operation() -> None:
    """A two-place instruction's opposite is sometimes the one-place form: "Remove noise from A to B" is also
    countered by "Repair break at A" (before, a one-place repair was almost never a hard negative)."""
    from neurorefiner.data.sample_shards import opposite_of
    from neurorefiner.topology.instructions import Instruction

    remove = Instruction("remove", "top-left-rear", "bottom-left-front")
    plain = {opposite_of(remove, np.random.default_rng(i)) for i in range(20)}
    assert plain == {remove.opposite()}
    mixed = {opposite_of(remove, np.random.default_rng(i), mixed=True) for i in range(60)}
    ends = {Instruction("repair", "top-left-rear"), Instruction("repair", "bottom-left-front")}
    assert mixed == {remove.opposite(), *ends}
    connect = Instruction("connect", "top-left-rear", "bottom-left-front")
    assert {opposite_of(connect, np.random.default_rng(i), mixed=True).op for i in range(60)} == {"remove"}
    one = Instruction("repair", "center-center-center")
    assert {opposite_of(one, np.random.default_rng(i), mixed=True) for i in range(20)} == {one.opposite()}


def test_fresh_variants_show_one_image_with_its_edit_and_with_a_negative(shards: Path) -> None:
    stored = ShardDataset(shards / "train", augment=False)
    fresh = ShardDataset(shards / "train", augment=False, fresh_variants=True, mixed_opposites=True)
    i = next(i for i in range(len(stored)) if stored.meta[i]["variant"] == "correct")
    rng = np.random.default_rng(0)
    assert {stored.sample(i, rng)["variant"] for _ in range(30)} == {"correct"}
    seen = {}
    for _ in range(60):
        s = fresh.sample(i, rng)
        seen[s["variant"]] = s
        assert (s["mask"] != s["target"]).any() == (s["variant"] == "correct")
    assert {"correct", "opposite"} <= set(seen)
    dm = Stage1DefectDataModule(dataset="unused", crop_size=CROP, batch_size=2, samples_per_epoch=4, val_samples=2,
                                shards=str(shards), fresh_variants=True, mixed_opposites=True)
    ds = dm.train_dataloader().dataset
    assert ds.variant_shares == {"correct": 0.5, "wrong_place": 0.25, "opposite": 0.25} and ds.mixed_opposites


def test_finding_a_whole_stacks_errors_holds_no_volume_per_piece() -> None:
    """A segmented stack holds thousands of error pieces; one full-size array each filled 24 GB while stage-2
    shards were made (the system killed the workers). Now the pieces are index lists: memory stays near a few
    volumes' worth however many pieces there are."""
    import tracemalloc

    shape = (32, 128, 128)  # 0.5 M voxels: 300 specks as full-size masks would be 150 MB
    gold = np.zeros(shape, dtype=bool)
    gold[16, 64, :] = True
    mask = gold.copy()
    rng = np.random.default_rng(0)
    for z, y, x in zip(rng.integers(0, 30, 300), rng.integers(0, 60, 300), rng.integers(0, 126, 300)):
        mask[z:z + 2, y:y + 2, x:x + 2] = True  # specks away from the gold (rows 0-61, the gold at 64)
    tracemalloc.start()
    errors = find_errors(mask, gold, min_voxels=4)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(errors) > 150 and {e.op for e in errors} == {"remove"}
    assert peak < 40e6, f"peak {peak / 1e6:.0f} MB"


def _dying_loader() -> list:
    import os

    os._exit(1)  # what the system's out-of-memory killer does to a worker


def test_a_killed_shard_worker_is_one_clear_error_not_a_hang(tmp_path: Path) -> None:
    from neurorefiner.data.sample_shards import ShardSettings, write_shards

    with pytest.raises(InputError, match="killed"):
        write_shards(tmp_path / "s", _dying_loader, stage1_record, ShardSettings(stage=1), 4, shard_size=2,
                     workers=2, progress=False)
