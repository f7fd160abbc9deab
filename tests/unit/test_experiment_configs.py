"""Every training conf/experiment/*.yaml composes into conf/train.yaml and resolves, and every shipped checkpoint's card
cites the one line (``python train.py experiment=<name> ship=true``) that rebuilds it: the config writes the file
the card names under outputs/, and ``ship=true`` copies that file onto the shipped one, starting only from what a
clone has (the shipped stage-1 checkpoint, bundled or generated data), never outputs/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from neurorefiner.training.refiner import checkpoint_name, output_checkpoint
from neurorefiner.training.shipping import is_shipped, shipped_path

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TRAIN_KEYS = {"task", "stage", "stages", "segmentation"}  # keys only conf/train.yaml has (evaluate.py shares the group)


def _is_training_experiment(path: Path) -> bool:
    return bool(TRAIN_KEYS & set(OmegaConf.load(path)))


EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml") if _is_training_experiment(p))
SHIPPED = sorted([*(ROOT / "checkpoints").glob("*.ckpt"), *(ROOT / "checkpoints" / "segmenters").glob("*.pt")])
REBUILD = re.compile(r"^python train\.py experiment=(\S+) ship=true$", re.MULTILINE)


def _compose(overrides: list[str], monkeypatch: pytest.MonkeyPatch) -> DictConfig:
    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="train", overrides=[*overrides, "paths.output_dir=/tmp/nr-test-out"])


def _output(cfg: DictConfig) -> Path:
    """The file the composed training run writes (train_refiner / train_baseline / train_segmenter)."""
    if cfg.task == "refine":
        return output_checkpoint(cfg)
    if cfg.task == "baseline":
        from neurorefiner.training.refinement_baselines import baseline_checkpoint

        return baseline_checkpoint(cfg)
    seg = cfg.segmentation
    return Path(seg.export_path) if seg.get("export_path") else Path(seg.ckpt_dir) / "segmenter.pt"


def _rebuild_section(card: Path) -> str:
    text = card.read_text()
    assert "## Rebuild" in text, f"{card.name} has no Rebuild section"
    return text.split("## Rebuild", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_resolves(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _compose([f"experiment={name}"], monkeypatch)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert container["paths"]["root_dir"] == str(ROOT)
    if cfg.task == "refine" and cfg.get("stage") is not None:
        node = cfg.stages[str(cfg.stage)]
        log_dir = str(cfg.paths.log_dir)
        for key in ("init_from", "datamodule.init_masks_root"):
            value = OmegaConf.select(node, key)
            assert value is None or not str(value).startswith(log_dir), f"{name}: {key} reads outputs/"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_checkpoint_is_rebuilt_by_one_config(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    card = path.with_suffix(".md")
    assert card.exists(), f"{path.name} has no card"
    section = _rebuild_section(card)
    lines = REBUILD.findall(section)
    assert lines, f"{card.name}: no `python train.py experiment=<name> ship=true` line in its Rebuild section"
    name = lines[-1]  # the last line of the section is the one that writes the shipped file
    assert name in EXPERIMENTS, f"{card.name} cites experiment={name}, which conf/experiment/ lacks"
    cfg = _compose([f"experiment={name}", "ship=true"], monkeypatch)  # ship is a key of train.yaml, not +ship
    assert cfg.ship is True
    written = _output(cfg)
    assert not is_shipped(cfg, written), f"experiment={name} writes onto a shipped file ({written}): refused"
    out = written.relative_to(ROOT)
    assert f"`{out}`" in section, f"{card.name} does not name {out}, the file experiment={name} writes"
    shipped = path.relative_to(ROOT)
    assert shipped_path(cfg, written) == path, f"ship=true copies {out} to {shipped_path(cfg, written)}, not {shipped}"
    assert f"`{shipped}`" in section, f"{card.name} does not say that ship=true copies {out} to {shipped}"
    if cfg.task == "refine" and str(cfg.stage) == "2":  # stage 2 starts from weights kept in git, not outputs/
        start = Path(cfg.stages["2"].init_from)
        assert (ROOT / "checkpoints") in start.parents and start.exists(), f"{card.name}: stage 2 starts from {start}"


def test_debug_shrinks_an_experiment(monkeypatch: pytest.MonkeyPatch) -> None:
    """debug/ comes after experiment/ in the defaults: a debug run of a shipped recipe takes two steps."""
    cfg = _compose(["experiment=toporefinenet_stage1", "debug=fast"], monkeypatch)
    assert cfg.stages["1"].max_steps == 2 and cfg.trainer.max_steps == 2


def test_plus_stage_still_selects_a_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _compose(["+stage=1"], monkeypatch)
    assert cfg.stage == 1 and "1" in cfg.stages


def test_refiner_card_cites_the_rebuild_line(tmp_path: Path) -> None:
    """The card writer reads figures from the run's JSON and the network from the checkpoint, and cites the
    experiment line per stage."""
    import json

    import torch

    from neurorefiner.training.cards import ship_refiner

    src = tmp_path / "run"
    src.mkdir()
    for stage in (1, 2):
        torch.save({"hyper_parameters": {"net_config": {"_target_": "x", "channels": [8, 16]}}, "state_dict": {}},
                   src / checkpoint_name(stage))
        (src / checkpoint_name(stage)).with_suffix(".json").write_text(json.dumps(
            {"train/steps": 10.0 * stage, "train/wall_s": 60.0, "val/dice": 0.5 + stage / 10}))
    shipped = ship_refiner(src, tmp_path / "ckpts", "net", {1: "net_stage1", 2: "net"}, "synthetic", "a CPU")
    assert [p.name for p in shipped] == ["net.ckpt", "net_stage1.ckpt"]
    card = (tmp_path / "ckpts" / "net.md").read_text()
    assert "python train.py experiment=net_stage1 ship=true\n" in card
    assert "python train.py experiment=net ship=true\n" in card
    assert "channels=[8, 16]" in card and "val/dice: 0.7000" in card and "steps: 20" in card
    stage1 = (tmp_path / "ckpts" / "net_stage1.md").read_text()
    assert "experiment=net_stage1" in stage1 and "## Stage 2" not in stage1


def test_baseline_card_cites_ship_true_and_where_the_checkpoint_ships(tmp_path: Path) -> None:
    """A learned baseline writes its card beside the checkpoint under outputs/; once shipped, that card must
    still hold the line that rebuilds the shipped file and name both places."""
    import torch

    from neurorefiner.training.refinement_baselines import baseline_card

    ckpt = tmp_path / "outputs" / "train" / "checkpoints" / "segfix.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"x")
    node = OmegaConf.create({"net": {"_target_": "torch.nn.Linear", "in_features": 2, "out_features": 1},
                             "module": {}, "lr": 1e-3, "datamodule": {"defects": {"probs": {"break": 1.0}},
                                                                      "crop_size": [8, 8, 8], "batch_size": 1,
                                                                      "val_samples": 2}})
    meta = {"kind": "segfix", "experiment": "segfix", "train/steps": 3.0, "train/wall_s": 6.0}
    card = baseline_card(ckpt, meta, torch.nn.Linear(2, 1), node, tmp_path, 3, tmp_path / "checkpoints" / "segfix.ckpt")
    section = card.split("## Rebuild", 1)[1]
    assert REBUILD.findall(section) == ["segfix"]
    assert "`outputs/train/checkpoints/segfix.ckpt`" in section and "`checkpoints/segfix.ckpt`" in section


def test_touch_experiment_turns_touch_on_beside_the_stage1_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """experiment=toporefinenet_stage1_touch is the stage-1 recipe with touching fibres drawn, written to its
    own file (not the stage-1 run's) from the shipped stage-1 checkpoint; the stage-1 recipe stays without."""
    from neurorefiner.defects.generate import DefectConfig

    cfg = _compose(["experiment=toporefinenet_stage1_touch"], monkeypatch)
    base = _compose(["experiment=toporefinenet_stage1"], monkeypatch)
    node = cfg.stages["1"]
    probs = DefectConfig.build(OmegaConf.to_container(node.datamodule.defects, resolve=True)).probs
    assert probs == {"break": 0.4, "paste": 0.2, "noise": 0.2, "touch": 0.2}
    assert "touch" not in base.stages["1"].datamodule.defects.probs
    assert output_checkpoint(cfg).name == "toporefinenet_stage1_touch.ckpt" != output_checkpoint(base).name
    assert not is_shipped(cfg, output_checkpoint(cfg))
    assert Path(node.init_from) == ROOT / "checkpoints" / checkpoint_name(1)
    assert cfg.model.edit_weight == base.model.edit_weight and node.max_steps == base.stages["1"].max_steps


@pytest.mark.parametrize("preset", ["cwmbs_weak", "cwmbs_noise", "bigneuron", "zbfwb"])
def test_nnunet_style_standin_shares_the_unet_recipe(preset: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nnU-Net-style stand-in row shares the preset U-Net's data, crops, validation and pick. Both ran 1,800
    steps; where the U-Net has been cut to the 300-step schedule its checkpoint choice picked (cwmbs_weak,
    bigneuron), the nnU-Net-style recipe keeps the 1,800 steps it was shipped with, so each card's rebuild line
    rebuilds its own file."""
    cfg = _compose([f"experiment=nnunet_style_synthetic_{preset}_cpu"], monkeypatch)
    base = _compose([f"experiment=unet3d_synthetic_{preset}_cpu"], monkeypatch)
    assert cfg.model._target_.endswith("NNUNetStyle") and base.model._target_.endswith("UNet3D")
    assert cfg.dataset.name == base.dataset.name == f"synthetic_{preset}"
    assert cfg.segmentation.data == base.segmentation.data and cfg.segmentation.module == base.segmentation.module
    assert cfg.segmentation.pick == base.segmentation.pick == "trace"
    # retrained on its calibrated preset with the U-Net's 300-step recipe; the others keep the 1,800 steps shipped
    shares_short = {"cwmbs_noise"}
    assert (cfg.trainer.max_epochs, cfg.trainer.check_val_every_n_epoch) == ((1, 1) if preset in shares_short
                                                                             else (6, 2))
    # U-Nets shipped from the 300-step schedule (learning rate decayed over the 300 steps)
    short = {"cwmbs_weak", "bigneuron", "cwmbs_noise", "zbfwb"}
    expect = (1, 1) if preset in short else (6, 2)
    assert (base.trainer.max_epochs, base.trainer.check_val_every_n_epoch) == expect
    assert cfg.segmentation.data.samples_per_epoch == base.segmentation.data.samples_per_epoch == 600
    assert _output(cfg).name == f"nnunet_style_synthetic_{preset}_cpu.pt" != _output(base).name


@pytest.mark.parametrize("phase", ["toporefinenet_stage1_budget", "toporefinenet_stage1_budget_faint",
                                   "toporefinenet_stage1_budget_film", "toporefinenet_stage1_budget_gate"])
def test_the_committed_budget_run_resumes_under_today_s_config(monkeypatch, phase) -> None:
    """The long CPU run's records (checkpoints/resume/...) were written before the loss and the network gained
    options: at their defaults they train the same weights, so the resume must not be refused."""
    import json

    from neurorefiner.training.refiner import module_defaults, refiner_settings
    from neurorefiner.training.run_settings import differences

    record = ROOT / "checkpoints" / "resume" / phase / "run_settings.json"
    if not record.exists():
        pytest.skip("no committed resume point")
    experiment = phase.replace("toporefinenet_stage1_budget", "toporefinenet_cpu_budget")
    cfg = _compose([f"experiment={experiment}"], monkeypatch)
    now = json.loads(json.dumps(refiner_settings(cfg), default=str))
    old = json.loads(record.read_text())
    # the record names the machine's paths where it ran; in another checkout (CI's /check/...) it is the same run
    assert differences(old, now, module_defaults(cfg)) == []
    elsewhere = json.loads(json.dumps(old).replace("/work/main/", "/somewhere/else/neurorefiner/"))
    assert differences(elsewhere, now, module_defaults(cfg)) == []
    changed = differences(old, {**now, "model": {**now["model"], "negative_weight": 10.0}}, module_defaults(cfg))
    assert changed == ["model.negative_weight: 0.0 -> 10.0"]


def test_the_gate_phase_continues_phase_three_with_the_gate(monkeypatch) -> None:
    """Phase 4 of the long run is phase 3's recipe plus the edit gate, from phase 3's committed weights, into its
    own file (a resume point of its own, not phase 3's)."""
    cfg = _compose(["experiment=toporefinenet_cpu_budget_gate"], monkeypatch)
    film = _compose(["experiment=toporefinenet_cpu_budget_film"], monkeypatch)
    assert cfg.model.net.edit_gate and not film.model.net.get("edit_gate", False)
    assert cfg.model.net.text_film and film.model.net.text_film
    assert Path(cfg.stages["1"].init_from) == (ROOT / "checkpoints" / "resume" / "toporefinenet_stage1_budget_film"
                                              / "last.ckpt")
    assert output_checkpoint(cfg).name == "toporefinenet_stage1_budget_gate.ckpt" != output_checkpoint(film).name
    assert cfg.stages["1"].datamodule.shards == film.stages["1"].datamodule.shards
    assert cfg.model.residual == film.model.residual and cfg.model.edit_weight == film.model.edit_weight


def test_an_adapted_refiners_scratch_is_not_a_shipped_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """`neurorefiner adapt` trains its editor into <folder>/work/ (git-ignored) and copies the result out: that
    scratch is writable even when the folder sits under checkpoints/, while the folder's own editor.ckpt is not."""
    cfg = _compose(["experiment=adapt_editor", f"adapt_dir={ROOT}/checkpoints/refiners/x"], monkeypatch)
    assert not is_shipped(cfg, _output(cfg))
    assert _output(cfg) == ROOT / "checkpoints" / "refiners" / "x" / "work" / "editor" / "editor.ckpt"
    assert is_shipped(cfg, ROOT / "checkpoints" / "refiners" / "x" / "editor.ckpt")


def test_a_baseline_trained_on_another_dataset_says_so_on_its_card(tmp_path: Path) -> None:
    """The card used to name DIADEM OP_1-OP_5 whatever the run learned from: a baseline trained on a stand-in's train
    split (by `neurorefiner adapt`) carried DIADEM's provenance. The cases and the dataset now come from the run."""
    import torch

    from neurorefiner.training.refinement_baselines import baseline_card

    ckpt = tmp_path / "work" / "segfix.ckpt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"x")
    node = OmegaConf.create({"net": {"_target_": "torch.nn.Linear", "in_features": 2, "out_features": 1},
                             "module": {}, "lr": 1e-3, "datamodule": {"defects": {"probs": {"break": 1.0}},
                                                                      "crop_size": [8, 8, 8], "batch_size": 1,
                                                                      "val_samples": 2}})
    meta = {"kind": "segfix", "experiment": "segfix", "train/steps": 3.0, "train/wall_s": 6.0,
            "dataset": "synthetic_bigneuron", "train_cases": ["b_train_000"], "val_cases": ["b_val_000"]}
    card = baseline_card(ckpt, meta, torch.nn.Linear(2, 1), node, tmp_path, 3)
    assert "DIADEM" not in card and "OP_" not in card
    assert "synthetic_bigneuron b_train_000" in card and "b_val_000" in card
    assert "python train.py experiment=segfix dataset=synthetic_bigneuron paths.checkpoint_dir=work" in card
    assert "ship=true" not in card
