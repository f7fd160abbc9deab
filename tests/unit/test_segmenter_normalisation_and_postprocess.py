"""The DIADEM segmenter recipe: robust normalisation, image-adaptive labels, post-processing of
the probability map, wide default windows, and the normalisation record in checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from neurorefiner.data.datamodules.segmentation import SegmentationDataModule, adaptive_label, load_case
from neurorefiner.data.transforms import DEFAULT_PERCENTILES, normalization_spec, normalize_image, percentiles_of
from neurorefiner.errors import InputError
from neurorefiner.inference.segmenter import (
    Segmenter,
    default_window,
    export_segmenter,
    load_segmenter,
    max_input_of,
    segment_array,
)
from neurorefiner.io import read_mask
from neurorefiner.models.segmenters.unet3d import UNet3D
from neurorefiner.models.sliding_window import sliding_window_probs
from neurorefiner.postprocessing.masks import DEFAULT_POSTPROCESS, PostProcess, postprocess_mask
from tests.unit.test_segment_fixtures import TinyDataset
from tests.unit.test_segment_inference import UNET_CFG


def _stack(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = rng.normal(20, 5, (16, 48, 48)).clip(0, None)
    image[8, 10:40, 24] += 150  # a bright fibre, 30 of 36864 voxels
    return image.astype(np.float32)


# ----------------------------------------------------------------------------------- normalisation
def test_single_hot_voxel_barely_changes_percentile_normalisation():
    image = _stack()
    hot = image.copy()
    hot[0, 0, 0] = 1e6
    rest = np.ones(image.shape, bool)
    rest[0, 0, 0] = False
    a, b = normalize_image(image)[rest], normalize_image(hot)[rest]
    assert np.abs(a - b).max() < 0.02
    assert normalize_image(hot)[0, 0, 0] == 1.0  # clipped, not 1e4
    # min-max (percentiles=None), the old behaviour, is what the hot voxel breaks: the test can fail
    old_a, old_b = normalize_image(image, percentiles=None), normalize_image(hot, percentiles=None)
    assert np.abs(old_a[rest] - old_b[rest]).max() > 0.1


def test_percentile_normalisation_range_and_fallbacks():
    image = _stack()
    out = normalize_image(image)
    assert out.dtype == np.float32 and out.min() == 0.0 and out.max() == 1.0
    lo, hi = np.percentile(image, DEFAULT_PERCENTILES)
    mid = (image > lo) & (image < hi)
    assert np.allclose(out[mid], (image[mid] - lo) / (hi - lo), atol=1e-6)
    # a stack whose high percentile equals its low one (one bright voxel): min-max instead of all-zero
    sparse = np.zeros((8, 8, 8), np.float32)
    sparse[4, 4, 4] = 9.0
    assert normalize_image(sparse, percentiles=(1.0, 99.0))[4, 4, 4] == 1.0
    assert not normalize_image(np.full((3, 3, 3), 5.0)).any()
    with pytest.raises(ValueError, match="percentiles"):
        normalize_image(image, percentiles=(50.0, 10.0))
    bad = image.copy()
    bad[1, 1, 1] = np.nan
    with pytest.raises(InputError, match="stack.tif"):
        normalize_image(bad, "stack.tif")


def test_normalisation_record_roundtrip():
    assert percentiles_of(normalization_spec((1.0, 99.99))) == (1.0, 99.99)
    assert percentiles_of(normalization_spec(None)) is None
    assert percentiles_of("minmax") is None and percentiles_of(None) is None  # first-round checkpoints


# ----------------------------------------------------------------------------------- adaptive labels
def _fibre(shape=(20, 100, 100), width=3.0):
    """A fibre along x at (z=4, y=20) with a Gaussian cross-section, a dark gap, and a blob far away; sparse
    (under 1 % of the voxels), as neurites are in a stack."""
    z, y, _ = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij")
    r2 = ((z - 4) * 3.0) ** 2 + (y - 20.0) ** 2  # z voxels 3x longer than y/x voxels
    image = 100.0 * np.exp(-r2 / (2 * width**2))
    image[:, :, 28:33] = 0.0  # a gap in the signal the gold trace bridges
    image[4, 2:6, 5:9] = 100.0  # a bright blob 14+ voxels from the centreline
    image += np.random.default_rng(0).normal(0, 1, shape)
    centreline = np.zeros(shape, bool)
    centreline[4, 20, 2:38] = True
    tube = np.zeros(shape, bool)
    tube[4, 19:22, 2:38] = True
    return image.astype(np.float32), centreline, tube


def test_adaptive_label_widens_to_the_fibre_only():
    image, cl, tube = _fibre()
    sp = (3.0, 1.0, 1.0)
    lab = adaptive_label(image, cl, tube, sp, band=4.0, rel=0.5)
    assert (lab >= tube).all()  # union: never loses the gold tube
    assert lab[4, 17:24, 10].all()  # half-maximum of a sigma-3 profile: |dy| <= 3.5
    assert not lab[4, 14, 10] and not lab[4, 26, 10]
    assert not lab[:, :10, :12].any()  # the far blob is not labelled
    assert (lab[:, :, 29:32] == tube[:, :, 29:32]).all()  # in the dark gap only the tube stays
    assert adaptive_label(image, cl, tube, sp, band=0.0).sum() == tube.sum()
    with pytest.raises(ValueError):
        adaptive_label(image, cl, tube, sp, rel=0.0)


def test_load_case_adaptive_labels(tmp_path):
    ds = TinyDataset(tmp_path, n_dev=1, n_test=0)
    case = ds.cases("dev")[0]
    gold, adaptive = load_case(case, labels="gold"), load_case(case, labels="adaptive")
    assert (adaptive.label >= gold.label).all() and adaptive.label.sum() >= gold.label.sum()
    assert set(np.unique(adaptive.label)) <= {0, 1} and adaptive.fg.size == adaptive.label.sum()
    with pytest.raises(ValueError, match="labels"):
        load_case(case, labels="thick")
    case.swc_path = None
    with pytest.raises(InputError, match="SWC"):
        load_case(case, labels="adaptive")
    with pytest.raises(ValueError, match="labels"):
        SegmentationDataModule(ds, labels="thick")
    dm = SegmentationDataModule(TinyDataset(tmp_path / "b", n_dev=2, n_test=0), labels="adaptive",
                                normalization=None, num_workers=0)
    dm.setup()
    assert dm.normalization is None and dm.train_cases[0].image.max() == 1.0


# ----------------------------------------------------------------------------------- post-processing
def test_postprocess_threshold_dust_and_largest():
    probs = np.zeros((10, 30, 30), np.float32)
    probs[2, 2:25, 5] = 0.9  # 23 voxels, the neuron
    probs[7, 5:15, 20] = 0.7  # 10 voxels
    probs[5, 28, 28] = 0.9  # 1 voxel of speckle
    probs[8, 20:25, 2] = 0.4  # below 0.5
    assert postprocess_mask(probs, PostProcess(0.5)).sum() == 34
    assert postprocess_mask(probs, PostProcess(0.3)).sum() == 39
    assert postprocess_mask(probs, PostProcess(0.5, dust_voxels=5)).sum() == 33
    only = postprocess_mask(probs, PostProcess(0.5, keep_largest=1))
    assert only.sum() == 23 and only[2, 2:25, 5].all()
    assert postprocess_mask(probs, PostProcess(0.5, dust_voxels=50)).sum() == 0
    assert postprocess_mask(np.zeros((4, 4, 4)), PostProcess(0.5, 5, 1)).dtype == bool
    for bad in ({"threshold": 1.0}, {"dust_voxels": -1}, {"keep_largest": -2}):
        with pytest.raises(ValueError):
            PostProcess(**bad)


def test_default_window_is_wide_but_within_the_volume():
    assert default_window((24, 128, 128), (101, 512, 512)) == (64, 256, 256)
    assert default_window((24, 128, 128), (40, 200, 300)) == (40, 200, 256)
    assert default_window((24, 128, 128), (10, 60, 60)) == (24, 128, 128)  # smaller than the patch: pad
    assert default_window((32, 128, 128), (101, 512, 512), max_input=(32, 128, 128)) == (32, 128, 128)


def test_fixed_input_network_is_segmented_with_windows_it_accepts():
    """UNETR's ViT takes inputs up to its img_size only; the wide default window used to be refused."""
    from neurorefiner.models.segmenters.unetr import UNETR

    torch.manual_seed(0)
    cfg = {"_target_": "neurorefiner.models.segmenters.unetr.UNETR", "size": "cpu", "img_size": [16, 32, 32],
           "feature_size": 4, "hidden_size": 32, "mlp_dim": 32, "num_heads": 2}
    net = UNETR(size="cpu", img_size=(16, 32, 32), feature_size=4, hidden_size=32, mlp_dim=32, num_heads=2)
    seg = Segmenter(net=net, arch="unetr", patch_size=(16, 32, 32), net_config=cfg)
    assert max_input_of(net) == (16, 32, 32) and max_input_of(UNet3D(features=(4, 8, 16))) is None
    mask, probs = segment_array(seg, np.random.default_rng(0).random((20, 70, 70)).astype(np.float32))
    assert mask.shape == probs.shape == (20, 70, 70)


# ----------------------------------------------------------------------------------- checkpoints
def test_checkpoint_records_normalisation_and_inference_uses_it(tmp_path):
    torch.manual_seed(0)
    net = UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2))
    new = export_segmenter(net, UNET_CFG, tmp_path / "new.pt", (8, 16, 16),
                           normalization=normalization_spec((1.0, 99.0)))
    old = export_segmenter(net, UNET_CFG, tmp_path / "old.pt", (8, 16, 16))
    seg_new, seg_old = load_segmenter(new), load_segmenter(old)
    assert seg_new.normalization == (1.0, 99.0) and seg_old.normalization is None
    image = _stack()
    image[0, 0, 0] = 1e5  # a hot voxel: moves min-max, not percentiles
    _, p_new = segment_array(seg_new, image, patch_size=(8, 16, 16))
    _, p_old = segment_array(seg_old, image, patch_size=(8, 16, 16))
    ref = sliding_window_probs(seg_new.net, normalize_image(image, percentiles=(1.0, 99.0)), (8, 16, 16))
    assert np.allclose(p_new, ref, atol=1e-5)
    assert not np.allclose(p_new, p_old)
    mask, probs = segment_array(seg_new, image, patch_size=(8, 16, 16), post=PostProcess(0.5, keep_largest=1))
    assert (mask == postprocess_mask(probs, PostProcess(0.5, keep_largest=1))).all()
    mask_t, _ = segment_array(seg_new, image, threshold=0.99, patch_size=(8, 16, 16))
    assert mask_t.sum() <= (probs > 0.99).sum()


def _tiny_export(tmp_path, monkeypatch, n_test: int):
    """A small U-Net export and the registry answering every dataset name with a tiny test split."""
    import neurorefiner.data as data_pkg

    torch.manual_seed(0)
    ds = TinyDataset(tmp_path / "d", n_dev=0, n_test=n_test)
    monkeypatch.setattr(data_pkg, "get_dataset", lambda name, **kw: ds)
    return export_segmenter(UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2)), UNET_CFG, tmp_path / "u.pt",
                            (8, 16, 16), normalization=normalization_spec(DEFAULT_PERCENTILES))


def test_init_masks_recompute_when_postprocessing_changes(tmp_path, monkeypatch):
    from neurorefiner.inference import init_masks
    from neurorefiner.inference.segmenter import record_postprocess

    export = _tiny_export(tmp_path, monkeypatch, n_test=1)

    record_postprocess(export, PostProcess(0.6, 0, 1), chosen_on="test")
    out = tmp_path / "m"
    init_masks.write_init_masks("tiny", "unet3d", export, "test", out, progress=False)
    first = json.loads((out / "manifest.json").read_text())
    # refinement's input keeps every component (the far side of a break, noise blobs), whatever the
    # checkpoint's own component filter
    assert first["postprocess"] == {"threshold": 0.6, "dust_voxels": 0, "keep_largest": 0}
    assert first["window"] == "default"
    init_masks.write_init_masks("tiny", "unet3d", export, "test", out, progress=False,
                                post=PostProcess(0.9, 0, 1))
    second = json.loads((out / "manifest.json").read_text())
    assert second["postprocess"] == {"threshold": 0.9, "dust_voxels": 0, "keep_largest": 1}
    assert _cli(["--dataset", "tiny", "--model", str(export), "--out", str(out),
                            "--window", "8,x,16"]) == 2


def test_init_masks_probability_cache_gives_the_same_masks_with_one_pass(tmp_path, monkeypatch):
    """segmenter-rows scores two post-processings of each case; the probability map is computed once."""
    from neurorefiner.inference import init_masks
    from neurorefiner.inference import segmenter as inference

    export = _tiny_export(tmp_path, monkeypatch, n_test=2)
    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    plain = init_masks.write_init_masks("tiny", "unet3d", export, "test", tmp_path / "plain", progress=False,
                                        post=PostProcess(0.5, 0, 1))
    passes = []
    real = inference.sliding_window_probs
    monkeypatch.setattr(inference, "sliding_window_probs", lambda *a, **k: passes.append(1) or real(*a, **k))
    for post, out in ((PostProcess(0.5, 0, 1), "a"), (PostProcess(0.5, 0, 0), "b"), (PostProcess(0.5, 0, 1), "c")):
        paths = init_masks.write_init_masks("tiny", "unet3d", export, "test", tmp_path / out, progress=False,
                                            post=post, cache_probs=True)
    assert len(passes) == 2  # one per case, then read back
    cached = sorted((tmp_path / "cache" / "probs").rglob("*.npy"))
    assert len(cached) == 2
    for p_plain, p_cached in zip(plain, paths, strict=True):
        assert np.array_equal(read_mask(p_plain).load(), read_mask(p_cached).load())


def test_recorded_postprocess_is_the_checkpoints_default(tmp_path):
    from neurorefiner.inference.segmenter import record_postprocess, recorded_postprocess

    torch.manual_seed(0)
    export = export_segmenter(UNet3D(features=(4, 8, 16), first_stride=(1, 2, 2)), UNET_CFG, tmp_path / "u.pt",
                              (8, 16, 16), meta={"note": "kept"})
    assert recorded_postprocess(load_segmenter(export)) == DEFAULT_POSTPROCESS
    chosen = PostProcess(0.4, 100, 1)
    record_postprocess(export, chosen, "OP_6")
    seg = load_segmenter(export)
    assert recorded_postprocess(seg) == chosen and seg.meta["note"] == "kept"
    assert seg.meta["postprocess_chosen_on"] == "OP_6"
    before = export.read_bytes()
    record_postprocess(export, chosen, "OP_6")  # the same record again: the file (and its hash) stay as they are
    assert export.read_bytes() == before
    image = _stack()
    mask, probs = segment_array(seg, image, patch_size=(8, 16, 16))
    assert (mask == postprocess_mask(probs, chosen)).all()
    torch.save({"state_dict": {}}, tmp_path / "plain.pt")
    with pytest.raises(InputError, match="exported"):
        record_postprocess(tmp_path / "plain.pt", chosen, "OP_6")
    with pytest.raises(InputError, match="not found"):
        record_postprocess(tmp_path / "missing.pt", chosen, "OP_6")


def _cli(args: list[str]) -> int:
    """``neurorefiner init-masks ARGS``; its exit code."""
    from typer.testing import CliRunner

    from neurorefiner.cli.main import app

    return CliRunner().invoke(app, ["init-masks", *args]).exit_code
