"""Training at scale, end to end on 2 CPU cores (docs/training_at_scale.md):

* ``python train.py +stage=1 trainer=ddp`` on CPU (2 processes, gloo) of a tiny stage-1 config finishes and
  writes one checkpoint and one card, from rank 0 only;
* a run started again from the ``last.ckpt`` that a kill at the start of its second epoch leaves behind
  (``weights_only=True``) ends with the same weights as the uninterrupted run;
* an Optuna search of 3 trials writes its SQLite study, and the same command again resumes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]

TINY_STAGE1 = ["+stage=1", "dataset=tiny", "text_encoder=hashing", "logger=none", "model.net.channels=[4,8,16]",
               "stages.1.datamodule.crop_size=[16,32,32]", "stages.1.datamodule.batch_size=2",
               "trainer.enable_progress_bar=false", "+trainer.enable_model_summary=false"]


class SnapshotLast(L.Callback):
    """Test helper: at the start of epoch ``epoch``, rank 0 copies ``last.ckpt`` of ``src`` to ``dst``: exactly
    what a kill at that moment leaves on disk (the rest of the run then goes on, as the reference)."""

    def __init__(self, src: str, dst: str, epoch: int = 1) -> None:
        self.src, self.dst, self.epoch = Path(src), Path(dst), int(epoch)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch == self.epoch and trainer.is_global_zero:
            self.dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.src / "last.ckpt", self.dst)


def _state(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["state_dict"]


@pytest.mark.slow
def test_ddp_stage1_writes_one_checkpoint_and_card_and_a_killed_run_resumes_to_the_same_weights(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    run_a = a / "runs" / "refine" / "toporefinenet_stage1"
    killed = b / "runs" / "refine" / "toporefinenet_stage1" / "last.ckpt"
    # 8 crops an epoch over 2 ranks x batch 2 = 2 steps an epoch; 4 steps = 2 epochs
    data = ["stages.1.datamodule.samples_per_epoch=8", "stages.1.datamodule.val_samples=3", "stages.1.max_steps=4"]
    snapshot = (f"+callbacks.snapshot={{_target_:tests.integration.test_ddp_training.SnapshotLast,"
                f"src:'{run_a}',dst:'{killed}',epoch:1}}")
    cmd = [sys.executable, "train.py", *TINY_STAGE1, *data, "trainer=ddp", "trainer.accelerator=cpu",
           "trainer.devices=2", "trainer.precision=32", f"paths.checkpoint_dir={a}",
           f"hydra.run.dir={tmp_path / 'run_a'}", snapshot]
    env = {**os.environ, "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])

    # one checkpoint and one card, written once (rank 0); the scratch last.ckpt removed at the finish
    assert sorted(p.name for p in a.iterdir() if p.is_file()) == ["toporefinenet_stage1.ckpt",
                                                                  "toporefinenet_stage1.json"]
    card = json.loads((a / "toporefinenet_stage1.json").read_text())
    assert card["world_size"] == 2 and card["train/steps"] == 4 and 0.0 <= card["val/dice"] <= 1.0
    assert not (run_a / "last.ckpt").exists()
    assert (tmp_path / "run_a" / "train_ddp_process_1.log").exists()  # rank 1 was a process of its own

    # what the kill left: last.ckpt of epoch 0; started again with the same settings, the run resumes from it
    assert killed.exists() and torch.load(killed, map_location="cpu", weights_only=True)["epoch"] == 0
    from hydra import compose, initialize_config_dir

    from neurorefiner.training.entry import run

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="train", overrides=[
            *TINY_STAGE1, *data, "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2",
            "trainer.precision=32",
            "trainer.strategy=ddp_fork_find_unused_parameters_true",  # the same DDP, ranks forked from here
            f"paths.checkpoint_dir={b}", f"paths.output_dir={tmp_path / 'run_b'}"])
    run(cfg)
    resumed = json.loads((b / "toporefinenet_stage1.json").read_text())
    assert resumed["resumed_from"] == str(killed)  # (a forked run's main process does not see the step count)
    sa, sb = _state(a / "toporefinenet_stage1.ckpt"), _state(b / "toporefinenet_stage1.ckpt")
    assert sa.keys() == sb.keys()
    different = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not different, different[:5]


@pytest.mark.slow
def test_optuna_search_writes_its_sqlite_study_and_the_same_command_resumes_it(tmp_path, monkeypatch):
    optuna = pytest.importorskip("optuna")
    import sqlalchemy

    assert int(sqlalchemy.__version__.split(".")[0]) < 2 or int(optuna.__version__.split(".")[0]) >= 3, (
        "optuna 2.x (hydra-optuna-sweeper pins optuna<3) cannot create its SQLite schema with SQLAlchemy 2: "
        "install 'sqlalchemy<2' 'alembic<1.14'")
    import runpy

    from hydra.core.global_hydra import GlobalHydra

    argv = ["train.py", "-m", "hparams_search=toporefinenet_stage1_optuna",
            *[a for a in TINY_STAGE1 if a != "+stage=1"], "stages.1.datamodule.samples_per_epoch=2",
            "stages.1.datamodule.val_samples=2", "stages.1.max_steps=1", f"paths.log_dir={tmp_path}"]
    db = tmp_path / "optuna" / "toporefinenet_stage1.db"
    monkeypatch.setattr(sys, "argv", [*argv, "hydra.sweeper.n_trials=3"])
    runpy.run_path(str(ROOT / "train.py"), run_name="__main__")  # in this process: no second start-up
    GlobalHydra.instance().clear()
    study = optuna.load_study(study_name="toporefinenet_stage1", storage=f"sqlite:///{db}")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert all(0.0 <= t.value <= 1.0 for t in study.trials)
    monkeypatch.setattr(sys, "argv", [*argv, "hydra.sweeper.n_trials=1"])
    runpy.run_path(str(ROOT / "train.py"), run_name="__main__")  # the same search again: one more trial
    GlobalHydra.instance().clear()  # a Hydra run leaves its global state behind; later tests compose afresh
    study = optuna.load_study(study_name="toporefinenet_stage1", storage=f"sqlite:///{db}")
    assert len(study.trials) == 4 and study.best_value == max(t.value for t in study.trials)


@pytest.mark.slow
def test_one_device_run_with_keyed_crops_resumes_to_the_same_weights(tmp_path):
    """keyed_sampling=true on one device: the crops and the per-step seeds follow the step count, so the state
    a kill leaves resumes exactly here too (without it a one-device run keeps its historical random stream)."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.training.entry import run

    a, b = tmp_path / "a", tmp_path / "b"
    killed = b / "runs" / "refine" / "toporefinenet_stage1" / "last.ckpt"
    # 4 crops an epoch, batch 2 = 2 steps an epoch; 4 steps = 2 epochs
    common = [*TINY_STAGE1, "stages.1.datamodule.samples_per_epoch=4", "stages.1.datamodule.val_samples=2",
              "stages.1.max_steps=4", "stages.1.datamodule.keyed_sampling=true"]

    def train(out: Path, extra: list[str]) -> None:
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
            cfg = compose(config_name="train", overrides=[*common, f"paths.checkpoint_dir={out}",
                                                          f"paths.output_dir={out / 'run'}", *extra])
        run(cfg)

    src = a / "runs" / "refine" / "toporefinenet_stage1"
    train(a, [f"+callbacks.snapshot={{_target_:tests.integration.test_ddp_training.SnapshotLast,"
              f"src:'{src}',dst:'{killed}',epoch:1}}"])
    train(b, [])
    assert json.loads((b / "toporefinenet_stage1.json").read_text())["resumed_from"] == str(killed)
    sa, sb = _state(a / "toporefinenet_stage1.ckpt"), _state(b / "toporefinenet_stage1.ckpt")
    assert [k for k in sa if not torch.equal(sa[k], sb[k])] == []
