"""train_refiner end to end on a tiny synthetic (labelled synthetic) defect set: stage 1, then stage 2
initialised from stage 1, checkpoints written, metrics returned, and TopoRefiner loads the result."""

from __future__ import annotations

import json

import lightning as L
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, Dataset

from neurorefiner.agents.instructions import Instruction
from neurorefiner.errors import InputError
from neurorefiner.topology.positions import Position, cell_index


def toy_sample(rng: np.random.Generator, shape=(12, 24, 24)) -> dict:
    """A straight synthetic tube with one break (repair) or one noise blob (remove), its instruction
    written through the grammar, and the region it names."""
    d, h, w = shape
    gold = np.zeros(shape, bool)
    z0, y0 = int(rng.integers(2, d - 2)), int(rng.integers(3, h - 3))
    gold[z0 - 1:z0 + 1, y0 - 1:y0 + 1, :] = True
    mask = gold.copy()
    if rng.random() < 0.5:
        x0 = int(rng.integers(1, w - 6))
        mask[:, :, x0:x0 + 5] = False
        op, centre = "repair", (z0, y0, x0 + 2)
    else:
        c = (int(rng.integers(2, d - 2)), int(rng.integers(2, h - 2)), int(rng.integers(2, w - 2)))
        mask[c[0] - 1:c[0] + 2, c[1] - 1:c[1] + 2, c[2] - 1:c[2] + 2] = True
        op, centre = "remove", c
    pos = Position.from_cell(cell_index(np.array([centre]), shape)[0])
    ins = Instruction(op, pos)
    image = np.clip(gold * 0.8 + rng.normal(0.1, 0.05, shape), 0, 1).astype(np.float32)
    return {"image": image[None], "mask": mask[None].astype(np.float32), "target": gold[None].astype(np.float32),
            "instruction": ins.format(), "region": ins.region(shape)[None]}


class _ToySet(Dataset):
    def __init__(self, n: int, seed: int, shape) -> None:
        self.n, self.seed, self.shape = n, seed, tuple(shape)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        s = toy_sample(np.random.default_rng(self.seed * 100003 + i), self.shape)
        return {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in s.items()}


class ToyRefineDataModule(L.LightningDataModule):
    """Honours the stage DataModules' batch contract; synthetic and tiny, for tests only."""

    def __init__(self, n_train: int = 8, n_val: int = 4, batch_size: int = 4, shape=(12, 24, 24), seed: int = 0):
        super().__init__()
        self.n_train, self.n_val, self.batch_size, self.shape, self.seed = n_train, n_val, batch_size, shape, seed

    def train_dataloader(self):
        return DataLoader(_ToySet(self.n_train, self.seed, self.shape), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(_ToySet(self.n_val, self.seed + 1, self.shape), batch_size=self.batch_size)


def _cfg(tmp_path, text_encoder: dict, max_steps: int = 3) -> OmegaConf:
    dm = {"_target_": "tests.integration.test_refine_training.ToyRefineDataModule", "n_train": 8, "n_val": 4}
    model = OmegaConf.load("conf/model/toporefinenet.yaml")
    model.net.channels = [4, 8, 16]
    return OmegaConf.create({
        "seed": 1,
        "paths": {"checkpoint_dir": str(tmp_path / "ckpt"), "cache_dir": str(tmp_path / "cache")},
        "text_encoder": text_encoder,
        "model": OmegaConf.to_container(model),
        "stages": {
            "1": {"datamodule": dm, "max_steps": max_steps, "lr": 1e-3, "init_from": None},
            "2": {"datamodule": dm, "max_steps": max_steps, "lr": 5e-4,
                  "init_from": "${paths.checkpoint_dir}/toporefinenet_stage1.ckpt"},
        },
        "trainer": {"_target_": "lightning.Trainer", "accelerator": "cpu", "devices": 1, "max_epochs": 1,
                    "enable_progress_bar": False, "enable_model_summary": False, "log_every_n_steps": 1},
        "logger": {"csv": {"_target_": "lightning.pytorch.loggers.CSVLogger", "save_dir": str(tmp_path / "logs"),
                           "name": "refine"}},
    })


@pytest.fixture(scope="module")
def hashing_encoder() -> dict:
    return {"_target_": "neurorefiner.models.text_encoders.HashingEncoder", "dim": 32}


@pytest.mark.slow
def test_two_stages_write_checkpoints_and_load(tmp_path, monkeypatch, project_root, hashing_encoder):
    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.training.refiner import train_refiner

    monkeypatch.chdir(project_root)
    cfg = _cfg(tmp_path, hashing_encoder)
    with pytest.raises(InputError, match="stage"):
        train_refiner(cfg)  # no stage given
    with pytest.raises(InputError, match=r"\+stage=1"):  # stage 2 before stage 1
        train_refiner(OmegaConf.merge(cfg, {"stage": 2}))

    m1 = train_refiner(OmegaConf.merge(cfg, {"stage": 1}))
    ck1 = tmp_path / "ckpt" / "toporefinenet_stage1.ckpt"
    assert ck1.exists() and ck1.stat().st_size < 20e6
    for key in ("val/dice", "val/adherence", "val/betti0_error", "val/loss"):
        assert key in m1 and np.isfinite(m1[key]) or key == "val/adherence"
    assert m1["train/steps"] == 3
    saved = json.loads(ck1.with_suffix(".json").read_text())
    assert saved["stage"] == 1 and saved["val/dice"] == pytest.approx(m1["val/dice"])
    assert list((tmp_path / "logs").rglob("metrics.csv"))

    m2 = train_refiner(OmegaConf.merge(cfg, {"stage": 2}))
    ck2 = tmp_path / "ckpt" / "toporefinenet_stage2.ckpt"
    assert ck2.exists() and "val/dice" in m2
    s1 = torch.load(ck1, weights_only=True)["state_dict"]
    s2 = torch.load(ck2, weights_only=True)["state_dict"]
    assert s1.keys() == s2.keys() and any(not torch.equal(s1[k], s2[k]) for k in s1)
    assert torch.load(ck2, weights_only=True)["hyper_parameters"]["stage"] == 2

    refiner = TopoRefiner.load(ck2)
    s = toy_sample(np.random.default_rng(5))
    out = refiner.edit(s["image"][0], s["mask"][0], s["instruction"])
    assert out.dtype == bool and out.shape == s["mask"][0].shape
    # the loaded network reproduces the trained one exactly
    net2 = refiner.net
    assert all(torch.equal(v, s2["net." + k]) for k, v in net2.state_dict().items())


@pytest.mark.slow
def test_stage2_rejects_checkpoint_of_another_architecture(tmp_path, monkeypatch, project_root, hashing_encoder):
    from neurorefiner.training.refiner import train_refiner

    monkeypatch.chdir(project_root)
    cfg = _cfg(tmp_path, hashing_encoder, max_steps=1)
    train_refiner(OmegaConf.merge(cfg, {"stage": 1}))
    cfg.model.net.channels = [4, 8, 32]
    with pytest.raises(InputError, match="does not fit"):
        train_refiner(OmegaConf.merge(cfg, {"stage": 2}))
