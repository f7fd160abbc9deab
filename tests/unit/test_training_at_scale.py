"""Training on several devices behaves as on one (docs/training_at_scale.md): the samplers split the crops
across ranks (disjoint, deterministic, independent of the world size), validation metrics reduced over 2 ranks
equal the 1-rank figures for one fixed set of weights (both tasks), the Slurm and DDP configs compose with
train.py as the launchers do with evaluate.py, and a local multirun that Lightning's DDP could not launch is
refused with one line."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.data.samplers import KeyedCropSampler, ShardSampler
from neurorefiner.errors import InputError
from tests.unit.test_stage2_data import mined_setup  # noqa: F401  (the fixture: fake masks of one segmenter)

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


# ---------------------------------------------------------------------------------------------- samplers
def test_keyed_sampler_splits_the_crop_stream_into_disjoint_equal_shares_whatever_the_world_size():
    one = list(KeyedCropSampler(10, seed=3, num_replicas=1, rank=0))
    shares = [list(KeyedCropSampler(10, seed=3, num_replicas=3, rank=r)) for r in range(3)]
    assert {len(s) for s in shares} == {4}  # equal step counts: DDP's gradient sync needs them
    keys = [k for s in shares for k in s]
    assert len(set(keys)) == len(keys) == 12  # disjoint; the 2 past the length are fresh crops, not repeats
    assert set(one) <= set(keys)  # crop n of the stream is the same crop on one device or three
    assert all(k[0] == 3 for k in keys)


def test_keyed_sampler_continues_the_stream_where_the_run_stopped():
    s = KeyedCropSampler(6, seed=0, num_replicas=2, rank=1)
    first = list(s)
    s.set_epoch(1)
    second = list(s)
    assert not set(first) & set(second)  # a new pass, new crops
    s.position_fn = lambda: 3  # the trainer's count of crops this rank consumed (what StepSeed attaches)
    assert list(s) == second  # a run resumed after 3 crops draws what the uninterrupted run drew next


def test_shard_sampler_gives_every_item_once_without_padding():
    shares = [list(ShardSampler(5, num_replicas=2, rank=r)) for r in range(2)]
    assert shares == [[0, 2, 4], [1, 3]]
    assert sorted(i for s in shares for i in s) == list(range(5))


def test_a_keyed_training_crop_is_a_function_of_its_key():
    from neurorefiner.data.datamodules.segmentation import LoadedCase, RandomPatchDataset

    rng = np.random.default_rng(0)
    label = (rng.random((12, 20, 20)) > 0.9).astype(np.uint8)
    case = LoadedCase("c", rng.random((12, 20, 20)).astype(np.float32), label, np.flatnonzero(label))
    ds = RandomPatchDataset([case], (8, 16, 16), samples_per_epoch=4)
    a, b, c = ds[(0, 5)], ds[(0, 5)], ds[(0, 6)]
    assert torch.equal(a["image"], b["image"]) and not torch.equal(a["image"], c["image"])


# ---------------------------------------------------------------------------------------------- configs
def _compose(overrides: list[str], hydra: bool = False):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="train", overrides=overrides, return_hydra_config=hydra)


def test_trainer_ddp_composes_for_both_tasks_and_builds_a_ddp_trainer():
    for task in (["+stage=1"], ["task=segment", "model=unet3d"]):
        cfg = _compose([*task, "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=2"])
        assert cfg.trainer.strategy.startswith("ddp") and cfg.trainer.num_nodes == 2
        assert cfg.trainer.sync_batchnorm is True and cfg.trainer.accelerator == "gpu"
    cfg = _compose(["+stage=1", "trainer=ddp", "trainer.accelerator=cpu", "trainer.precision=32"])
    from hydra.utils import instantiate

    trainer = instantiate(cfg.trainer, logger=False, enable_checkpointing=False, default_root_dir="/tmp")
    assert type(trainer.strategy).__name__ == "DDPStrategy" and trainer.world_size == 2


@pytest.mark.parametrize("experiment", ["paper_scale_toporefinenet_stage1", "paper_scale_toporefinenet_stage2",
                                        "paper_scale_unet3d_diadem"])
def test_train_composes_with_the_slurm_launcher_and_the_paper_scale_recipes(experiment):
    cfg = _compose([f"experiment={experiment}", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=2",
                    "hydra/launcher=submitit_slurm", "hydra.launcher.gpus_per_node=4",
                    "hydra.launcher.tasks_per_node=4", "hydra.launcher.nodes=2",
                    "hydra.launcher.partition=gpu"], hydra=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.gpus_per_node, launcher.tasks_per_node, launcher.nodes) == (4, 4, 2)
    assert (cfg.trainer.devices, cfg.trainer.num_nodes) == (4, 2)
    crop = (cfg.stages[str(cfg.stage)].datamodule.crop_size if cfg.task == "refine"
            else cfg.segmentation.data.patch_size)
    assert list(crop)[1:] == [128, 128]  # the paper's 128 x 128 blocks


def test_train_py_slurm_line_prints_its_config_from_the_command_line():
    """The documented Slurm line, printed instead of run (Hydra refuses ``-m`` together with ``--cfg``, so the
    line is checked without ``-m``: the same composition, launcher included)."""
    out = subprocess.run([sys.executable, "train.py", "hydra/launcher=submitit_slurm",
                          "experiment=paper_scale_toporefinenet_stage1", "trainer=ddp", "trainer.devices=4",
                          "hydra.launcher.gpus_per_node=4", "hydra.launcher.tasks_per_node=4", "--cfg", "all"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    cfg = OmegaConf.create(out.stdout)
    assert cfg.trainer.strategy.startswith("ddp") and cfg.trainer.devices == 4 and cfg.stage == 1
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.tasks_per_node == 4


@pytest.mark.parametrize("search", ["toporefinenet_stage1_optuna", "segmenter_optuna"])
def test_hparams_search_composes_an_optuna_study_in_sqlite(search):
    cfg = _compose([f"hparams_search={search}", "paths.log_dir=/tmp/x"], hydra=True)
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_.endswith("OptunaSweeper") and sweeper.direction == "maximize"
    assert str(sweeper.storage).startswith("sqlite:////tmp/x/optuna/") and sweeper.params
    assert cfg.optimized_metric == "val/pick"


def test_ddp_inside_a_local_multirun_is_refused(monkeypatch):
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from neurorefiner.training.distributed import check_launch

    for var in ("SLURM_NTASKS", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    cfg = _compose(["+stage=1", "trainer=ddp"], hydra=True)
    cfg.hydra.mode = RunMode.MULTIRUN
    HydraConfig.instance().set_config(cfg)
    try:
        with pytest.raises(InputError, match="Slurm"):
            check_launch(cfg)
        monkeypatch.setenv("SLURM_NTASKS", "8")  # Slurm starts the ranks: fine
        check_launch(cfg)
    finally:
        HydraConfig.instance().cfg = None


def test_the_objective_is_the_named_metric():
    from neurorefiner.training.entry import objective

    assert objective(OmegaConf.create({}), {"val/pick": 0.5}) is None
    assert objective(OmegaConf.create({"optimized_metric": "val/pick"}), {"val/pick": 0.5}) == 0.5
    with pytest.raises(InputError, match="val/pick"):
        objective(OmegaConf.create({"optimized_metric": "val/pick"}), {"val/dice": 0.5})


# ---------------------------------------------------------------------------------------------- reduction
def _validate(module, dm, devices: int) -> dict[str, float]:
    kw = {"strategy": "ddp_fork"} if devices > 1 else {}
    trainer = L.Trainer(accelerator="cpu", devices=devices, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, **kw)
    return {k: float(v) for k, v in trainer.validate(module, datamodule=dm, verbose=False)[0].items()}


def test_segmenter_validation_reduced_over_two_ranks_equals_one_rank():
    """Three validation cases on two ranks (2 + 1): val Dice and val trace F1 are means over the three cases,
    not the mean of the two ranks' means."""
    from neurorefiner.data.datamodules.segmentation import SegmentationDataModule
    from neurorefiner.data.registry import get_dataset
    from neurorefiner.models.segmentation_module import SegmentationModule
    from neurorefiner.models.segmenters import build_segmenter

    ds = get_dataset("tiny")
    names = [c.name for c in ds.cases("train")]
    dm = SegmentationDataModule(ds, train_split="train", val_cases=names[1:4], val_max_size=(24, 48, 48),
                                patch_size=(8, 16, 16), num_workers=0)
    torch.manual_seed(0)  # one fixed set of weights
    module = SegmentationModule(build_segmenter("unet3d", features=(4, 8, 16)), patch_size=(8, 16, 16),
                                threshold=0.4, trace_val=True)
    one = _validate(module, dm, 1)
    two = _validate(module, dm, 2)
    assert {"val/dice", "val/trace_f1"} <= set(one)
    assert set(one) == set(two)
    for k in one:
        assert two[k] == pytest.approx(one[k], rel=1e-6, abs=1e-7), k


def test_editor_validation_reduced_over_two_ranks_equals_one_rank():
    """Five fixed validation defects on two ranks (3 + 2, batches of 2): every val/* figure is the per-sample
    mean over all five."""
    from neurorefiner.data.datamodules.stage1 import Stage1DefectDataModule
    from neurorefiner.models.refine_module import TopoRefineModule
    from neurorefiner.models.text_encoders import HashingEncoder
    from neurorefiner.models.toporefinenet import TopoRefineNet

    dm = Stage1DefectDataModule("tiny", crop_size=(16, 32, 32), batch_size=2, val_samples=5, samples_per_epoch=2)
    torch.manual_seed(0)
    net = TopoRefineNet(spatial_dims=3, in_channels=2, out_channels=2, channels=(4, 8, 16), text_dim=64,
                        region_channel=True)
    module = TopoRefineModule(net, text_encoder=HashingEncoder(64))
    one = _validate(module, dm, 1)
    two = _validate(module, dm, 2)
    assert {"val/dice", "val/loss", "val/betti0_error"} <= set(one) and set(one) == set(two)
    for k in one:
        assert two[k] == pytest.approx(one[k], rel=1e-5, abs=1e-6), k


def test_stage2_keyed_items_follow_their_key_and_a_plain_pass_covers_every_crop(mined_setup):  # noqa: F811
    from neurorefiner.data.datamodules.stage2 import Stage2MinedDataModule

    ds, root, cache = mined_setup
    kw = dict(crop_size=(8, 16, 16), batch_size=2, samples_per_epoch=4, init_masks_root=root, cache_root=cache,
              min_foreground=10, progress=False, keyed_sampling=True, replay_prob=0.5)
    dm = Stage2MinedDataModule(ds, **kw)
    dm.setup()
    loader = dm.train_dataloader()
    assert isinstance(loader.sampler, KeyedCropSampler)
    item, again = loader.dataset[(0, 5)], loader.dataset[(0, 5)]
    assert item["instruction"] == again["instruction"] and torch.equal(item["mask"], again["mask"])
    plain = Stage2MinedDataModule(ds, **{**kw, "augment": False, "replay_prob": 0.0})
    plain.setup()
    n = len(plain.train_crops)
    keyed = plain.train_dataloader().dataset

    def content(it):
        return it["instruction"], it["mask"].numpy().tobytes()

    once_each = Counter(content(keyed.__getitem__(i)) for i in range(n))  # the crops in their stored order
    assert Counter(content(keyed[(0, i)]) for i in range(n)) == once_each  # one keyed pass: each crop once
