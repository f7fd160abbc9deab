"""Segmentation side end to end on the synthetic `tiny` preset: train a few steps through the real Hydra
config, write the initial masks of the test split, trace them with APP2 and score them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

CONF = Path(__file__).resolve().parents[2] / "conf"



@pytest.mark.slow
def test_train_init_masks_and_score_on_tiny(tmp_path):
    from neurorefiner.data import get_dataset
    from neurorefiner.inference.init_masks import write_init_masks
    from neurorefiner.io import read_mask
    from neurorefiner.metrics import score_mask
    from neurorefiner.training.segmenter import provenance_markdown, train_segmenter

    synth_root = tmp_path / "synth"
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="train", overrides=[
            "task=segment", "model=unet3d", "dataset=tiny", "logger=none", "trainer.max_steps=3",
            "trainer.max_epochs=10", "trainer.enable_progress_bar=false", f"paths.output_dir={tmp_path}",
            f"trainer.default_root_dir={tmp_path}", "model.features=[4,8,16]",
            "segmentation.data.patch_size=[16,32,32]", "segmentation.data.samples_per_epoch=4",
            "segmentation.data.num_workers=0", f"segmentation.ckpt_dir={tmp_path / 'ck'}"])
    with open_dict(cfg):
        cfg.dataset.root = str(synth_root)
        cfg.dataset.progress = False
    metrics = train_segmenter(cfg)
    assert metrics["global_step"] == 3 and np.isfinite(metrics["val/dice"])
    export = Path(metrics["export_path"])
    md = provenance_markdown(export, "python train.py task=segment model=unet3d dataset=tiny")
    assert "tiny_train_000" in md and "no test case was used" in md

    out = tmp_path / "init"
    paths = write_init_masks("tiny", "unet3d", export, "test", out, dataset_kwargs={"root": synth_root},
                             progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["synthetic"] is True and set(manifest["cases"]) == {p.stem for p in paths}
    again = write_init_masks("tiny", "unet3d", export, "test", out, dataset_kwargs={"root": synth_root},
                             progress=False)  # cached: nothing recomputed
    assert again == paths and json.loads((out / "manifest.json").read_text())["cases"] == manifest["cases"]

    case = get_dataset("tiny", root=synth_root, progress=False).cases("test")[0]
    mask = read_mask(paths[0]).load() > 0
    scores = score_mask(case.gold(), mask, case.spacing, case.label(mask.shape))
    assert {"F1", "SD", "Dice", "betti0_error"} <= set(scores)


@pytest.mark.slow
def test_naive_floor_masks_need_no_checkpoint(tmp_path):
    from neurorefiner.inference.init_masks import write_init_masks

    paths = write_init_masks("tiny", "otsu", split="test", out_dir=tmp_path / "otsu",
                             dataset_kwargs={"root": tmp_path / "synth", "progress": False}, progress=False)
    assert len(paths) == 2 and all(p.exists() for p in paths)


def test_missing_checkpoint_says_how_to_train(tmp_path):
    from neurorefiner.errors import InputError
    from neurorefiner.inference.init_masks import write_init_masks

    with pytest.raises(InputError, match="python train.py task=segment model=vnet"):
        write_init_masks("tiny", "vnet", tmp_path / "none.pt", "test", tmp_path / "o",
                         dataset_kwargs={"root": tmp_path / "synth", "progress": False}, progress=False)
