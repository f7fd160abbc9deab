"""SegmentationModule (loss, aux heads, schedule) and train_segmenter end to end on a tiny dataset,
including resuming an interrupted run from its last checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from neurorefiner.errors import InputError
from neurorefiner.inference.segmenter import load_segmenter
from neurorefiner.models.segmentation_module import SegmentationModule
from neurorefiner.models.segmenters import build_segmenter

CONF = Path(__file__).resolve().parents[2] / "conf"



def _batch():
    torch.manual_seed(0)
    label = torch.zeros(2, 1, 8, 16, 16, dtype=torch.long)
    label[:, :, 4, 8, 2:14] = 1
    return {"image": label.float() * 0.8 + 0.1 * torch.rand(2, 1, 8, 16, 16), "label": label}


@pytest.mark.parametrize("arch", ["unet3d", "sgsnet_style", "adtlnet_style"])
def test_training_step_gives_finite_loss_and_gradients(arch):
    net = build_segmenter(arch, features=(4, 8, 16))
    module = SegmentationModule(net, net_config={"_target_": "x"}, patch_size=(8, 16, 16))
    loss = module.training_step(_batch(), 0)
    assert torch.isfinite(loss)
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_loss_decreases_when_overfitting_one_batch():
    torch.manual_seed(0)
    module = SegmentationModule(build_segmenter("unet3d", features=(4, 8, 16)), patch_size=(8, 16, 16))
    opt = torch.optim.AdamW(module.parameters(), lr=1e-2)
    batch = _batch()
    first = None
    for _ in range(25):
        opt.zero_grad()
        loss = module.training_step(batch, 0)
        loss.backward()
        opt.step()
        first = first if first is not None else float(loss.detach())
    assert float(loss) < 0.85 * first


def _cfg(tmp_path: Path, max_steps: int, extra: tuple[str, ...] = ()):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="train", overrides=[
            "task=segment", "model=unet3d", "logger=none", f"trainer.max_steps={max_steps}",
            "trainer.max_epochs=100", "trainer.enable_progress_bar=false", "trainer.log_every_n_steps=1",
            f"trainer.default_root_dir={tmp_path}", f"paths.output_dir={tmp_path}",
            "model.features=[4,8,16]", "segmentation.data.patch_size=[8,16,16]",
            "segmentation.data.samples_per_epoch=4", "segmentation.data.num_workers=0",
            "segmentation.module.warmup_steps=1", f"segmentation.ckpt_dir={tmp_path / 'ck'}",
            *extra])
    cfg.dataset = {"_target_": "tests.unit.test_segment_fixtures.TinyDataset", "root": str(tmp_path / "data"),
                   "name": "tiny_fixture"}
    return cfg


def test_train_segmenter_exports_and_resumes(tmp_path):
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    metrics = train_segmenter(_cfg(tmp_path, 2))
    assert metrics["global_step"] == 2 and "val/dice" in metrics
    export = Path(metrics["export_path"])
    seg = load_segmenter(export, expected_arch="unet3d")
    assert seg.patch_size == (8, 16, 16)
    assert seg.meta["train_cases"] == ["dev_0", "dev_1"] and seg.meta["val_cases"] == ["dev_2"]
    assert (tmp_path / "ck" / "last.ckpt").exists()
    load_segmenter(tmp_path / "ck" / "last.ckpt", expected_arch="unet3d")  # Lightning checkpoints load too
    # "interrupted" run: a second call with a larger budget continues from last.ckpt
    metrics2 = train_segmenter(_cfg(tmp_path, 4))
    assert metrics2["global_step"] == 4
    assert load_segmenter(export).meta["resumed_from"].endswith("last.ckpt")


def test_last_checkpoint_follows_training_not_validation(tmp_path):
    """Regression: with save_last on the monitored callback, last.ckpt was only written when validation
    Dice improved, so a resumed run restarted from an old step. It must hold the latest step."""
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    # learning rate 0: the weights never change, so validation Dice never improves after the first check
    train_segmenter(_cfg(tmp_path, 4, ("segmentation.module.lr=0.0",)))
    state = torch.load(tmp_path / "ck" / "last.ckpt", map_location="cpu", weights_only=True)
    assert state["global_step"] == 4


def test_export_last_takes_the_end_of_the_schedule(tmp_path):
    """Cross-validation folds export the last checkpoint: their validation cases score the network later, so
    they may not also pick it."""
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    metrics = train_segmenter(_cfg(tmp_path, 4, ("segmentation.export_checkpoint=last",)))
    seg = load_segmenter(Path(metrics["export_path"]))
    assert seg.meta["exported"] == "last"
    last = torch.load(tmp_path / "ck" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    for name, value in seg.net.state_dict().items():
        assert torch.equal(value, last[f"net.{name}"]), name


def test_unknown_export_choice_fails_before_training(tmp_path):
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    with pytest.raises(ValueError, match="export_checkpoint"):
        train_segmenter(_cfg(tmp_path, 2, ("segmentation.export_checkpoint=newest",)))
    assert not (tmp_path / "ck" / "last.ckpt").exists()


def test_card_of_a_run_without_validation_says_so(tmp_path):
    """A network trained on every dev case has no validation figures: its card must not print 'Dice nan' or
    claim a checkpoint was picked on an empty list."""
    from neurorefiner.training.segmenter import provenance_markdown, train_segmenter

    (tmp_path / "data").mkdir()
    metrics = train_segmenter(_cfg(tmp_path, 2, ("segmentation.data.n_val=0", "segmentation.export_checkpoint=last")))
    card = provenance_markdown(metrics["export_path"], "python train.py ...")
    assert "no validation case" in card and "nan" not in card and "picked) on []" not in card


def test_nnunet_style_plans_from_the_training_datas_spacing(tmp_path):
    """Regression: conf/model/nnunet_style.yaml fixed DIADEM's spacing, so on another dataset the network was
    planned for voxels it never saw (nnU-Net's rules plan per dataset)."""
    from neurorefiner.training.segmenter import build_datamodule, build_module, training_spacing

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="train", overrides=[
            "task=segment", "model=nnunet_style", "logger=none", "segmentation.data.patch_size=[16,64,64]"])
    assert cfg.model.spacing is None
    iso = build_module(cfg, (1.0, 1.0, 1.0))
    aniso = build_module(cfg, (1.0, 0.2, 0.2))
    assert iso.hparams.net_config["spacing"] == [1.0, 1.0, 1.0]
    assert aniso.hparams.net_config["spacing"] == [1.0, 0.2, 0.2]
    assert iso.net.strides != aniso.net.strides  # 5x anisotropy: z is pooled later
    with pytest.raises(ValueError, match="spacing"):
        build_module(cfg)
    cfg.dataset = {"_target_": "tests.unit.test_segment_fixtures.TinyDataset", "root": str(tmp_path / "data"),
                   "name": "tiny_fixture"}
    (tmp_path / "data").mkdir()
    assert training_spacing(build_datamodule(cfg)) == (1.0, 1.0, 1.0)


def test_the_card_says_when_the_output_layer_started_at_a_prior(tmp_path):
    from neurorefiner.training.segmenter import provenance_markdown, train_segmenter

    no_val = ("segmentation.data.n_val=0", "segmentation.export_checkpoint=last")
    plain = train_segmenter(_cfg(tmp_path / "a", 1, no_val))
    primed = train_segmenter(_cfg(tmp_path / "b", 1, (*no_val, "segmentation.module.foreground_prior=0.01")))
    assert "foreground probability" not in provenance_markdown(plain["export_path"], "python train.py ...")
    assert "output layer started at foreground probability 0.01 " in provenance_markdown(primed["export_path"], "x")


def test_a_run_with_other_settings_does_not_resume_a_finished_run(tmp_path):
    """Regression: a finished run's last.ckpt was resumed by a run with other settings (labels=adaptive after a
    run on the label files), which then shipped the old weights. Now it is refused, naming the setting; a
    larger budget alone still resumes, and segmentation.resume=false starts over."""
    from neurorefiner.errors import InputError
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    train_segmenter(_cfg(tmp_path, 2))
    with pytest.raises(InputError) as err:
        train_segmenter(_cfg(tmp_path, 4, ("segmentation.module.lr=0.001",)))
    assert "module.lr: 0.002 -> 0.001" in str(err.value) and "segmentation.resume=false" in str(err.value)
    assert str(err.value).startswith(str(tmp_path / "ck" / "last.ckpt"))
    fresh = train_segmenter(_cfg(tmp_path, 2, ("segmentation.module.lr=0.001", "segmentation.resume=false")))
    assert fresh["global_step"] == 2
    assert load_segmenter(Path(fresh["export_path"])).meta["resumed_from"] is None
    assert train_segmenter(_cfg(tmp_path, 3, ("segmentation.module.lr=0.001",)))["global_step"] == 3


def test_the_card_says_a_trace_pick_was_scored_on_val_crops():
    """The pick's F1 on label-centred crops (0.757 for the cwmbs_weak stand-in) read as a whole-volume figure
    beside the chooser's 0.54; the card now says what the pick was scored on."""
    from neurorefiner.training.segmenter import _training_lines

    meta = {"val_cases": ["v0"], "picked_by": "val/trace_f1", "val_max_size": [32, 192, 192],
            "metrics": {"best_val_trace_f1": 0.757}}
    line = next(x for x in _training_lines(meta) if x.startswith("- checkpoint picked"))
    assert "centre-cropped on their label to at most 32 x 192 x 192): best 0.7570" in line
    line = next(x for x in _training_lines({**meta, "val_max_size": None}) if x.startswith("- checkpoint picked"))
    assert line.endswith("(threshold 0.5): best 0.7570")


def test_snapshots_keep_every_epochs_weights_as_inference_checkpoints(tmp_path):
    """segmentation.snapshot_every_n_epochs keeps candidates for the whole-volume checkpoint choice: one .pt per
    snapshot, each with its own step count and the weights of that step (the last one equals last.ckpt)."""
    from neurorefiner.training.segmenter import provenance_markdown, train_segmenter

    (tmp_path / "data").mkdir()
    train_segmenter(_cfg(tmp_path, 6, ("segmentation.snapshot_every_n_epochs=1",)))  # 2 steps an epoch
    snaps = sorted((tmp_path / "ck" / "snapshots").glob("*.pt"))
    assert [p.name for p in snaps] == ["step000002.pt", "step000004.pt", "step000006.pt"]
    metas = [load_segmenter(p, expected_arch="unet3d").meta for p in snaps]
    assert [m["global_step"] for m in metas] == [2, 4, 6]
    assert all(m["snapshot_of"]["global_step"] == 6 and m["exported"] == "snapshot" for m in metas)
    last = torch.load(tmp_path / "ck" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    first, final = (load_segmenter(p).net.state_dict() for p in (snaps[0], snaps[-1]))
    assert all(torch.equal(v, last[f"net.{k}"]) for k, v in final.items())
    assert not all(torch.equal(v, last[f"net.{k}"]) for k, v in first.items())
    card = provenance_markdown(snaps[0], "python train.py ...")
    assert "2 optimiser steps (a snapshot of a 6-step run)" in card and "chosen afterwards" in card


def test_a_bad_snapshot_interval_fails_before_training(tmp_path):
    from neurorefiner.training.segmenter import train_segmenter

    (tmp_path / "data").mkdir()
    with pytest.raises(InputError, match="snapshot_every_n_epochs"):
        train_segmenter(_cfg(tmp_path, 2, ("segmentation.snapshot_every_n_epochs=-1",)))
    assert not (tmp_path / "ck" / "last.ckpt").exists()
