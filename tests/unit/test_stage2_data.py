"""Stage-2 data: mining crops with significant errors, the pluggable instruction writer, the cache."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neurorefiner.agents import Instruction, parse_instruction
from neurorefiner.data.datamodules.stage2 import (
    MiningSettings,
    Stage2MinedDataModule,
    difference_writer,
    error_components,
    mine_volume,
    resolve_writer,
    tolerant_f1,
    writer_id,
)
from neurorefiner.defects import cut_break
from neurorefiner.errors import InputError
from neurorefiner.io import write_volume
from tests.unit.test_stage1_data import CROP, FakeDataset, check_batch

SHAPE = (16, 32, 32)


def line_x(shape=SHAPE) -> np.ndarray:
    g = np.zeros(shape, bool)
    g[7:9, 15:17, 2:30] = True  # a neurite along x through the middle
    return g


def test_tolerant_f1():
    g = line_x()
    assert tolerant_f1(g, g, 0) == 1.0
    shifted = np.roll(g, 1, axis=1)
    assert tolerant_f1(shifted, g, 0) < 0.9 and tolerant_f1(shifted, g, 1) == 1.0  # boundary slack
    assert tolerant_f1(np.zeros_like(g), np.zeros_like(g)) == 1.0
    assert tolerant_f1(np.zeros_like(g), g) == 0.0


def test_difference_writer_break_noise_and_nothing():
    gold = line_x()
    broken = cut_break(gold, np.array([8, 16, 8]), k=5)  # a short gap on the left
    assert difference_writer(None, broken, gold) == Instruction("repair", "center-left-center")
    long_gap = gold.copy()
    long_gap[:, :, 6:26] = False  # a gap across three x cells
    assert difference_writer(None, long_gap, gold).op == "connect"
    noisy = gold.copy()
    noisy[13:16, 27:30, 27:30] = True  # a blob at the bottom-right-rear corner
    assert difference_writer(None, noisy, gold) == Instruction("remove", "bottom-right-rear")
    thicker = gold | np.roll(gold, 1, axis=1)  # only boundary disagreement: no instruction
    assert difference_writer(None, thicker, gold) is None
    assert error_components(gold, gold) == []


def test_error_components_largest_first():
    gold = line_x()
    mask = gold.copy()
    mask[:, :, 10:20] = False  # FN, 40 voxels
    mask[0:2, 0:3, 0:3] = True  # FP, 18 voxels
    errs = error_components(mask, gold, tolerance=1, min_voxels=5)
    assert [k for k, _ in errs] == ["fn", "fp"]


def test_mine_volume_keeps_only_crops_with_errors():
    shape = (16, 32, 64)
    gold = np.zeros(shape, bool)
    gold[7:9, 15:17, 2:62] = True
    mask = gold.copy()
    mask[:, :, 40:48] = False  # a break in the right half only
    settings = MiningSettings(crop_size=(16, 32, 32), min_foreground=10)
    crops = mine_volume(np.zeros(shape, np.float32), mask, gold, settings, difference_writer, ("d", "s", "c"))
    assert [c.start for c in crops] == [(0, 0, 32)]
    assert crops[0].betti_mask == 2 and crops[0].betti_gold == 1
    assert parse_instruction(crops[0].instruction).op in ("repair", "connect")
    # a writer that declines skips the crop; one that writes free text is parsed
    assert mine_volume(np.zeros(shape, np.float32), mask, gold, settings, lambda i, m, g: None) == []
    texts = mine_volume(np.zeros(shape, np.float32), mask, gold, settings,
                        lambda i, m, g: "please repair the break at the Center Center Front")
    assert texts[0].instruction == "Repair break at center-center-front"
    bad = mine_volume(np.zeros(shape, np.float32), mask, gold, settings, lambda i, m, g: "looks fine")
    assert bad == []  # unreadable writer output is skipped (and logged), never trained on


def test_writer_resolution():
    assert resolve_writer(None) is difference_writer
    assert resolve_writer("neurorefiner.data.datamodules.stage2.difference_writer") is difference_writer
    assert resolve_writer("neurorefiner.data.datamodules.stage2:difference_writer") is difference_writer
    with pytest.raises(ValueError):
        resolve_writer("neurorefiner.data.datamodules.stage2.no_such_writer")
    with pytest.raises(ValueError):
        resolve_writer(3)  # type: ignore[arg-type]
    import functools

    p = functools.partial(difference_writer, tolerance=2)
    assert writer_id(p) == "neurorefiner.data.datamodules.stage2.difference_writer@2(tolerance=2)"

    def my_writer(image, mask, gold):
        return None

    assert writer_id(my_writer).endswith("test_writer_resolution.<locals>.my_writer")


@pytest.fixture()
def mined_setup(tmp_path):
    """A fake dataset and, for its train and val cases, masks of one 'segmenter' with breaks and noise."""
    ds = FakeDataset(tmp_path / "ds", counts=(3, 1, 1))
    root = tmp_path / "init_masks"
    rng = np.random.default_rng(0)
    for case in ds.cases("train") + ds.cases("val") + ds.cases("test"):
        gold = case.label()
        mask = gold.copy()
        fg = np.argwhere(gold)
        for c in fg[rng.choice(len(fg), 3, replace=False)]:
            mask = cut_break(mask, c, k=7)
        mask[1:4, 1:4, 1:4] = True  # a noise blob
        write_volume(root / "fake" / "unet" / f"{case.name}.tif", mask)
    return ds, root, tmp_path / "mined"


def test_datamodule_mines_caches_and_batches(mined_setup):
    ds, root, cache = mined_setup
    calls = []

    def counting_writer(image, mask, gold):
        calls.append(1)
        return difference_writer(image, mask, gold)

    kw = dict(crop_size=CROP, batch_size=2, samples_per_epoch=4, init_masks_root=root, cache_root=cache,
              min_foreground=10, progress=False)
    dm = Stage2MinedDataModule(ds, writer=counting_writer, **kw)
    dm.setup()
    assert dm.crops and calls
    assert {c.case for c in dm.crops} <= {"train_0", "train_1", "train_2"}  # never val/test cases
    assert {c.case for c in dm.val_crops} == {"train_2"}  # last case held out for validation
    manifest = json.loads(dm.manifest_path.read_text())
    assert manifest["n_crops"] == len(dm.crops) and manifest["writer"].endswith("counting_writer")
    assert len(manifest["sources"]) == 3
    check_batch(next(iter(dm.train_dataloader())), 2)
    vb = next(iter(dm.val_dataloader()))
    assert vb["instruction"] == [c.instruction for c in dm.val_crops][: len(vb["instruction"])]

    capped = Stage2MinedDataModule(ds, writer=counting_writer, **{**kw, "val_samples": 1})
    capped.setup()
    assert len(capped.val_crops) == 1 and capped.val_crops[0] == dm.val_crops[0]

    n = len(calls)
    dm2 = Stage2MinedDataModule(ds, writer=counting_writer, **kw)
    dm2.setup()
    assert len(calls) == n  # read back from the cache: the writer is not asked again
    assert [c.instruction for c in dm2.crops] == [c.instruction for c in dm.crops]

    dm3 = Stage2MinedDataModule(ds, writer=counting_writer, **{**kw, "max_f1": 0.5})
    dm3.setup()  # other settings -> mined again
    assert len(calls) > n and dm3.manifest_path != dm.manifest_path


def test_flips_keep_instruction_and_region_consistent(mined_setup):
    ds, root, cache = mined_setup
    dm = Stage2MinedDataModule(ds, crop_size=CROP, init_masks_root=root, cache_root=cache, min_foreground=10,
                               progress=False)
    dm.setup()
    ref = dm._dataset(dm.train_crops, None, augment=False)
    rng = np.random.default_rng(0)
    for i in range(len(ref)):
        plain = ref.sample(i)
        flipped = ref.sample(i, np.random.default_rng(int(rng.integers(1000))))
        # the share of the error that lies inside the named region does not change with a flip
        def share(s):
            err = s["mask"] ^ s["target"]
            return (err & s["region"]).sum() / max(err.sum(), 1)

        assert share(plain) == pytest.approx(share(flipped))
        assert parse_instruction(flipped["instruction"]).op == parse_instruction(plain["instruction"]).op


def test_local_target_only_edits_inside_the_region(mined_setup):
    ds, root, cache = mined_setup
    dm = Stage2MinedDataModule(ds, crop_size=CROP, init_masks_root=root, cache_root=cache, min_foreground=10,
                               target="local", progress=False)
    batch = next(iter(dm.val_dataloader()))
    outside = ~batch["region"]
    assert torch.equal(batch["target"][outside], batch["mask"][outside])


def test_missing_masks_and_bad_arguments(mined_setup, tmp_path):
    ds, root, cache = mined_setup
    dm = Stage2MinedDataModule(ds, crop_size=CROP, init_masks_root=tmp_path / "nowhere", cache_root=cache)
    with pytest.raises(InputError, match="init_masks"):
        dm.setup()
    with pytest.raises(ValueError, match="test"):
        Stage2MinedDataModule(ds, split="test", init_masks_root=root, cache_root=cache).setup()
    with pytest.raises(ValueError):
        Stage2MinedDataModule(ds, target="everything")
    with pytest.raises(ValueError):
        Stage2MinedDataModule(ds, crop_size=(8, 8))
    with pytest.raises(InputError, match="thresholds"):
        Stage2MinedDataModule(ds, crop_size=CROP, init_masks_root=root, cache_root=cache, max_f1=0.0,
                              min_betti_diff=1000, progress=False).setup()


def test_thick_masks_are_not_errors_but_spurs_and_specks_are():
    gold = line_x()
    thick = _dilate_n(gold, 2)  # two voxels thicker all round: not a topological error
    assert error_components(thick, gold) == []
    spur = thick.copy()
    spur[8, 16:30, 20] = True  # a branch that leaves the neurite towards the bottom
    kinds = [k for k, _ in error_components(spur, gold)]
    assert kinds == ["fp"]
    speck = gold.copy()
    speck[8, 19:21, 5:8] = True  # close to the neurite (within 3 voxels) but not touching it
    errs = error_components(speck, gold, min_voxels=5)
    assert [k for k, _ in errs] == ["fp"] and errs[0][1].sum() == 6


def _dilate_n(mask, n):
    from scipy import ndimage

    return ndimage.binary_dilation(mask, np.ones((3, 3, 3), bool), iterations=n)


def test_mined_targets_follow_the_named_operation_and_place():
    from neurorefiner.data.datamodules.stage2 import mined_target

    gold = np.zeros((1, 4, 4), bool)
    gold[0, 1, :] = True  # a neurite along row 1
    mask = gold.copy()
    mask[0, 1, 1] = False  # a break inside the region
    mask[0, 3, 0] = True  # noise inside the region
    mask[0, 3, 3] = True  # noise outside it
    region = np.zeros_like(gold)
    region[0, :, :2] = True
    assert np.array_equal(mined_target("gold", mask, gold, region, "repair"), gold)
    local = mined_target("local", mask, gold, region, "repair")
    assert local[0, 1, 1] and not local[0, 3, 0] and local[0, 3, 3]
    add = mined_target("instructed", mask, gold, region, "repair")
    assert add[0, 1, 1] and add[0, 3, 0] and add[0, 3, 3]  # repairs; removes nothing
    rm = mined_target("instructed", mask, gold, region, "remove")
    assert not rm[0, 1, 1] and not rm[0, 3, 0] and rm[0, 3, 3]  # removes in the region; adds nothing
    with pytest.raises(ValueError, match="target must be"):
        mined_target("everything", mask, gold, region, "repair")


def test_replay_mixes_stage1_defects_into_training_only(mined_setup):
    from neurorefiner.data.datamodules.stage2 import ReplayDataset

    ds, root, cache = mined_setup
    kw = dict(crop_size=CROP, batch_size=2, samples_per_epoch=6, init_masks_root=root, cache_root=cache,
              min_foreground=10, progress=False)
    dm = Stage2MinedDataModule(ds, replay_prob=1.0, replay={"defects": {"probs": {"break": 1.0}}}, **kw)
    loader = dm.train_dataloader()
    assert isinstance(loader.dataset, ReplayDataset) and len(loader.dataset) == 6
    batch = next(iter(loader))
    check_batch(batch, 2)
    # every replayed item is a stage-1 break: the target adds voxels and the instruction asks to connect/repair
    assert all(i.split()[0] in ("Repair", "Connect") for i in batch["instruction"])
    assert bool((batch["target"].bool() & ~batch["mask"].bool()).any())
    plain = Stage2MinedDataModule(ds, **kw)
    assert not isinstance(plain.train_dataloader().dataset, ReplayDataset)
    with pytest.raises(ValueError, match="replay_prob"):
        Stage2MinedDataModule(ds, replay_prob=2.0, **kw)
