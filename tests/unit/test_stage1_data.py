"""Stage-1 data: make_stage1_sample and Stage1DefectDataModule keep the batch contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from neurorefiner.agents import parse_instruction
from neurorefiner.data.cases import Case
from neurorefiner.data.datamodules.stage1 import (
    BATCH_KEYS,
    Stage1DefectDataModule,
    crop_padded,
    make_stage1_sample,
    split_cases,
)
from neurorefiner.defects import betti0
from neurorefiner.io import write_volume
from neurorefiner.io.swc import Tree

VOL = (24, 48, 48)
CROP = (16, 32, 32)


def neuron_volume(seed: int, shape=VOL) -> tuple[np.ndarray, np.ndarray]:
    """A random branching tree (gold) and an image that shows it over a noisy background."""
    rng = np.random.default_rng(seed)
    n = 6
    pts = np.stack([rng.uniform(3, s - 3, n) for s in shape], axis=1)
    parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
    gold = Tree.from_points(pts, parents, radius=1.5).rasterize(shape)
    image = np.clip(0.1 + 0.7 * gold + rng.normal(0, 0.05, shape), 0, 1).astype(np.float32)
    return image, gold


class FakeDataset:
    """A registry-style dataset of small synthetic cases written to TIFF (train/val/test splits)."""

    def __init__(self, root: Path, name: str = "fake", counts=(3, 1, 1), shape=VOL):
        self.name = name
        self.splits = ("train", "val", "test")
        self._cases: dict[str, list[Case]] = {}
        seed = 0
        for split, count in zip(self.splits, counts, strict=True):
            self._cases[split] = []
            for i in range(count):
                image, gold = neuron_volume(seed, shape)
                seed += 1
                ip, lp = root / f"{split}_{i}_image.tif", root / f"{split}_{i}_label.tif"
                write_volume(ip, (image * 255).astype(np.uint8))
                write_volume(lp, gold)
                self._cases[split].append(Case(f"{split}_{i}", name, split, ip, label_path=lp))

    def cases(self, split: str = "test") -> list[Case]:
        return list(self._cases[split])


@pytest.fixture(scope="module")
def fake_dataset(tmp_path_factory) -> FakeDataset:
    return FakeDataset(tmp_path_factory.mktemp("fake_ds"))


def check_batch(batch: dict, b: int, crop=CROP) -> None:
    assert tuple(batch) == BATCH_KEYS
    for key in ("image", "mask", "target"):
        t = batch[key]
        assert t.shape == (b, 1, *crop) and t.dtype == torch.float32
    assert batch["region"].shape == (b, 1, *crop) and batch["region"].dtype == torch.bool
    assert 0.0 <= batch["image"].min() and batch["image"].max() <= 1.0
    for key in ("mask", "target"):
        assert set(torch.unique(batch[key]).tolist()) <= {0.0, 1.0}
    assert isinstance(batch["instruction"], list) and len(batch["instruction"]) == b
    for i, text in enumerate(batch["instruction"]):
        ins = parse_instruction(text)
        assert ins.format() == text  # canonical form
        assert torch.equal(batch["region"][i, 0], torch.from_numpy(ins.region(crop)))
        assert not torch.equal(batch["mask"][i], batch["target"][i])  # every sample has a defect


def test_make_stage1_sample_contract():
    image, gold = neuron_volume(0)
    rng = np.random.default_rng(0)
    kinds = set()
    for _ in range(30):
        s = make_stage1_sample(image, gold, rng, CROP)
        assert s["image"].shape == s["mask"].shape == s["target"].shape == s["region"].shape == CROP
        assert s["image"].dtype == np.float32 and s["mask"].dtype == bool and s["region"].dtype == bool
        # the target is the gold crop at the sample's place
        assert (s["target"] == crop_padded(gold, s["start"], CROP)).all()
        assert (s["image"] == crop_padded(image, s["start"], CROP)).all()
        ins = parse_instruction(s["instruction"])
        assert ins == s["instruction_obj"]
        changed = s["mask"] ^ s["target"]
        assert changed.any()
        if s["kind"] == "break":
            assert ins.op in ("connect", "repair") and betti0(s["mask"]) > betti0(s["target"])
            assert not (s["mask"] & ~s["target"]).any()
        else:
            assert ins.op == "remove" and not (s["target"] & ~s["mask"]).any()
        kinds.add(s["kind"])
    assert kinds == {"break", "paste", "noise"}


def test_make_stage1_sample_pads_small_volumes_and_uses_other_masks():
    image, gold = neuron_volume(1, shape=(10, 20, 20))  # smaller than the crop in every axis
    _, other = neuron_volume(2, shape=(30, 50, 50))
    s = make_stage1_sample(image, gold, np.random.default_rng(0), CROP, other_masks=[other],
                           defects={"probs": {"paste": 1.0}}, min_foreground=5)
    assert s["mask"].shape == CROP and s["kind"] == "paste"


def test_make_stage1_sample_bad_input():
    image, gold = neuron_volume(0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        make_stage1_sample(image, np.zeros(VOL, bool), rng, CROP)
    with pytest.raises(ValueError):
        make_stage1_sample(image[:-1], gold, rng, CROP)
    with pytest.raises(ValueError):
        make_stage1_sample(image, gold, rng, (16, 32))


def test_datamodule_batches(fake_dataset):
    dm = Stage1DefectDataModule(fake_dataset, crop_size=CROP, batch_size=3, samples_per_epoch=6,
                                val_samples=4, min_foreground=10)
    dm.setup("fit")
    assert [v.name for v in dm.train_volumes] == ["train_0", "train_1", "train_2"]
    assert [v.name for v in dm.val_volumes] == ["val_0"]
    batches = list(dm.train_dataloader())
    assert len(batches) == 2
    for b in batches:
        check_batch(b, 3)
    vb = list(dm.val_dataloader())
    assert sum(len(b["instruction"]) for b in vb) == 4
    check_batch(vb[0], 3)


def test_validation_is_fixed_and_training_is_fresh(fake_dataset):
    kw = dict(crop_size=CROP, batch_size=4, samples_per_epoch=4, val_samples=4, min_foreground=10, seed=3)
    a, b = Stage1DefectDataModule(fake_dataset, **kw), Stage1DefectDataModule(fake_dataset, **kw)
    va, vb = next(iter(a.val_dataloader())), next(iter(b.val_dataloader()))
    assert va["instruction"] == vb["instruction"] and torch.equal(va["mask"], vb["mask"])
    assert torch.equal(next(iter(a.val_dataloader()))["mask"], va["mask"])  # same every epoch
    torch.manual_seed(0)
    t1 = next(iter(a.train_dataloader()))
    t2 = next(iter(a.train_dataloader()))
    assert not torch.equal(t1["mask"], t2["mask"])  # new defects every epoch
    torch.manual_seed(0)
    assert torch.equal(next(iter(b.train_dataloader()))["mask"], t1["mask"])  # reproducible under a seed


def test_datamodule_with_worker(fake_dataset):
    dm = Stage1DefectDataModule(fake_dataset, crop_size=CROP, batch_size=2, samples_per_epoch=4,
                                val_samples=2, num_workers=1, min_foreground=10)
    batches = list(dm.train_dataloader())
    assert len(batches) == 2
    check_batch(batches[0], 2)


def test_split_without_val_holds_out_last_case(tmp_path):
    class DevOnly(FakeDataset):
        def __init__(self, root):
            super().__init__(root, "devonly", counts=(3, 0, 0))
            self.splits = ("dev", "test", "all")
            self._cases = {"dev": self._cases["train"], "test": [], "all": self._cases["train"]}

    ds = DevOnly(tmp_path)
    train, val = split_cases(ds, None, None, val_cases=1)
    assert [c.name for c in train] == ["train_0", "train_1"] and [c.name for c in val] == ["train_2"]
    with pytest.raises(ValueError, match="test"):
        split_cases(ds, "test", None, 1)
    with pytest.raises(ValueError, match="test"):
        split_cases(ds, "dev", "test", 1)


def test_diadem_held_out_cases_are_refused(tmp_path):
    class LeakyDiadem:
        name = "diadem"
        splits = ("dev",)

        def cases(self, split):
            return [Case(f"OP_{k}", "diadem", "dev", tmp_path / f"OP_{k}.tif") for k in (1, 7)]

    with pytest.raises(ValueError, match="held-out"):
        split_cases(LeakyDiadem(), "dev", None, 1)


def test_datamodule_bad_arguments(fake_dataset):
    with pytest.raises(ValueError):
        Stage1DefectDataModule(fake_dataset, crop_size=(16, 32))
    with pytest.raises(ValueError):
        Stage1DefectDataModule(fake_dataset, batch_size=0)
    with pytest.raises(ValueError):
        Stage1DefectDataModule(fake_dataset, defects={"probs": {"tear": 1.0}})


@pytest.mark.slow
def test_diadem_dev_stage1(diadem_dir):
    dm = Stage1DefectDataModule("diadem", crop_size=(32, 64, 64), batch_size=2, samples_per_epoch=4,
                                val_samples=2)
    dm.setup()
    assert [v.name for v in dm.train_volumes] == ["OP_1", "OP_2", "OP_3", "OP_4", "OP_5"]
    assert [v.name for v in dm.val_volumes] == ["OP_6"]
    check_batch(next(iter(dm.train_dataloader())), 2, (32, 64, 64))


def _compose(overrides):
    from hydra import compose, initialize_config_dir

    from neurorefiner.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("train", overrides=overrides)


def test_stage_configs_build_the_datamodules(tmp_path, monkeypatch):
    from hydra.utils import instantiate

    from neurorefiner.data.datamodules.stage2 import Stage2MinedDataModule, difference_writer

    monkeypatch.setenv("NEUROREFINER_CACHE", str(tmp_path / "cache"))
    cfg = _compose(["+stage=1", "dataset=tiny", "stages.1.datamodule.val_samples=2",
                    "stages.1.datamodule.samples_per_epoch=2"])
    node = cfg.stages["1"]
    assert node.datamodule.crop_size == [32, 64, 64] and node.max_steps > 0 and node.lr > 0
    assert node.init_from is None
    dm = instantiate(node.datamodule)
    assert isinstance(dm, Stage1DefectDataModule) and dm.crop_size == (32, 64, 64)
    assert dm.defects.k_range == (5, 20)
    check_batch(next(iter(dm.train_dataloader())), 2, (32, 64, 64))  # the synthetic tiny preset

    cfg2 = _compose(["+stage=2", "dataset=tiny"])
    node2 = cfg2.stages["2"]
    assert str(node2.init_from).endswith("checkpoints/toporefinenet_stage1.ckpt")
    dm2 = instantiate(node2.datamodule)
    assert isinstance(dm2, Stage2MinedDataModule) and dm2.writer is difference_writer
    assert dm2.init_masks_root == tmp_path / "cache" / "init_masks"


def test_distractor_is_kept_in_the_target_and_away_from_the_named_place():
    from scipy import ndimage as ndi

    image, gold = neuron_volume(3)
    rng = np.random.default_rng(5)
    seen = 0
    for _ in range(12):
        s = make_stage1_sample(image, gold, rng, CROP, distractor_prob=1.0)
        if not s["distractor"]:
            continue
        seen += 1
        crop_gold = crop_padded(gold, s["start"], CROP)
        named = s["mask"] ^ s["target"]  # what the instruction asks to change
        unnamed = s["target"] ^ crop_gold  # the distractor: in input and target alike
        assert named.any() and unnamed.any()
        assert not (unnamed & ndi.binary_dilation(s["region"], iterations=4)).any()
        assert not (named & unnamed).any()
    assert seen >= 6
    plain = make_stage1_sample(image, gold, np.random.default_rng(5), CROP)
    assert plain["distractor"] == ""
    with pytest.raises(ValueError, match="distractor_prob"):
        make_stage1_sample(image, gold, rng, CROP, distractor_prob=1.5)


def test_touch_samples_paste_another_neurons_fibre_onto_the_neuron():
    """touch takes its fibre from the other masks, as paste does, and neither adds nor joins pieces."""
    image, gold = neuron_volume(4)
    _, other = neuron_volume(5)
    rng = np.random.default_rng(1)
    defects = {"probs": {"break": 0.0, "paste": 0.0, "noise": 0.0, "touch": 1.0}}
    for _ in range(4):
        s = make_stage1_sample(image, gold, rng, CROP, other_masks=[other], defects=defects, distractor_prob=0.5)
        assert s["kind"] == "touch" and s["distractor"] in ("", "touch")
        ins = parse_instruction(s["instruction"])
        assert ins.op == "remove" and len(ins.positions) == 2
        named = s["mask"] ^ s["target"]
        assert named.any() and not (s["target"] & ~s["mask"]).any()
        assert betti0(s["mask"]) == betti0(s["target"])  # merged into a piece, not a new one
