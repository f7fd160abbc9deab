"""Segmentation data: normalisation, crops with foreground oversampling, split rules of the DataModule."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neurorefiner.data.datamodules.segmentation import (
    LoadedCase,
    RandomPatchDataset,
    SegmentationDataModule,
    centre_crop_on_label,
    load_case,
    random_crop,
)
from neurorefiner.data.transforms import normalize_image
from neurorefiner.errors import InputError
from tests.unit.test_segment_fixtures import TinyDataset


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return TinyDataset(tmp_path_factory.mktemp("tiny_seg"))


def _case(shape=(10, 30, 30), fg_at=(5, 20, 20)) -> LoadedCase:
    image = np.zeros(shape, np.float32)
    label = np.zeros(shape, np.uint8)
    label[fg_at] = 1
    image[fg_at] = 1.0
    return LoadedCase("c", image, label, np.flatnonzero(label))


def test_normalize_image():
    out = normalize_image(np.array([[[10, 20], [30, 50]]], np.uint16))
    assert out.dtype == np.float32 and out.min() == 0.0 and out.max() == 1.0
    assert not normalize_image(np.full((2, 3, 4), 7.0)).any()  # constant -> zeros, no division by zero
    bad = np.zeros((2, 2, 2), np.float32)
    bad[0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        normalize_image(bad, "x.tif")
    bad[0, 0, 0] = np.inf
    with pytest.raises(InputError, match="x.tif"):
        normalize_image(bad, "x.tif")


def test_foreground_crop_contains_foreground():
    case = _case()
    rng = np.random.default_rng(0)
    for _ in range(20):
        img, lab = random_crop(case, (4, 8, 8), rng, foreground=True)
        assert img.shape == (4, 8, 8) and lab.sum() == 1


def test_crop_pads_volume_smaller_than_patch():
    case = _case(shape=(3, 5, 6), fg_at=(1, 2, 3))
    img, lab = random_crop(case, (8, 8, 8), np.random.default_rng(0), foreground=True)
    assert img.shape == (8, 8, 8) and lab.sum() == 1


def test_patch_dataset_items_and_oversampling():
    case = _case(shape=(12, 40, 40))
    ds = RandomPatchDataset([case], (4, 8, 8), samples_per_epoch=16, fg_prob=1.0, augment=False)
    torch.manual_seed(0)
    items = [ds[i] for i in range(len(ds))]
    assert all(it["image"].shape == (1, 4, 8, 8) and it["label"].dtype == torch.long for it in items)
    assert all(it["label"].sum() == 1 for it in items)
    uniform = RandomPatchDataset([case], (4, 8, 8), samples_per_epoch=30, fg_prob=0.0, augment=False)
    assert sum(int(uniform[i]["label"].sum()) for i in range(30)) < 10


def test_augmentation_keeps_label_binary_and_aligned():
    case = _case(shape=(12, 40, 40))
    ds = RandomPatchDataset([case], (8, 16, 16), samples_per_epoch=10, fg_prob=1.0, augment=True)
    torch.manual_seed(1)
    for i in range(10):
        it = ds[i]
        assert set(torch.unique(it["label"]).tolist()) <= {0, 1}
        assert 0.0 <= float(it["image"].min()) and float(it["image"].max()) <= 1.0


def test_bad_fg_prob():
    with pytest.raises(ValueError):
        RandomPatchDataset([_case()], (4, 8, 8), fg_prob=1.5)


def test_centre_crop_keeps_label():
    case = _case(shape=(10, 60, 60), fg_at=(5, 50, 50))
    out = centre_crop_on_label(case, (8, 20, 20))
    assert out.image.shape == (8, 20, 20) and out.label.sum() == 1


def test_load_case_rasterises_labels(tiny):
    c = load_case(tiny.cases("dev")[0])
    assert c.image.shape == c.label.shape and c.label.sum() > 50 and c.fg.size == c.label.sum()


def test_datamodule_splits(tiny):
    dm = SegmentationDataModule(tiny, patch_size=(8, 16, 16), num_workers=0)
    train, val = dm.split_cases()
    assert dm.train_split == "dev"
    assert [c.name for c in val] == ["dev_2"] and {c.name for c in train} == {"dev_0", "dev_1"}
    dm2 = SegmentationDataModule(tiny, val_cases=["dev_0"], patch_size=(8, 16, 16), num_workers=0)
    train2, val2 = dm2.split_cases()
    assert [c.name for c in val2] == ["dev_0"] and "dev_0" not in {c.name for c in train2}
    with pytest.raises(InputError, match="test"):
        SegmentationDataModule(tiny, train_split="test")
    with pytest.raises(InputError, match="test"):
        SegmentationDataModule(tiny, val_split="test").split_cases()
    with pytest.raises(InputError, match="not in split"):
        SegmentationDataModule(tiny, val_cases=["nope"]).split_cases()


def test_datamodule_loaders(tiny):
    dm = SegmentationDataModule(tiny, patch_size=(8, 16, 16), batch_size=2, samples_per_epoch=4, num_workers=0)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch["image"].shape == (2, 1, 8, 16, 16) and batch["label"].shape == (2, 1, 8, 16, 16)
    vb = next(iter(dm.val_dataloader()))
    assert vb["image"].shape[-3:] == vb["label"].shape[-3:]


def test_items_are_plain_tensors():
    """Regression: MONAI returned MetaTensors, which slowed every training op ~10x through metadata tracking."""
    ds = RandomPatchDataset([_case(shape=(12, 40, 40))], (8, 16, 16), samples_per_epoch=2, fg_prob=1.0)
    it = ds[0]
    assert type(it["image"]) is torch.Tensor and type(it["label"]) is torch.Tensor
