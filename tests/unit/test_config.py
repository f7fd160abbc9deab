"""Every config composes (as the user types it) and every dataset node instantiates."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

CONF = Path(__file__).resolve().parents[2] / "conf"


def _compose(name: str, overrides: list[str]):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name=name, overrides=[*overrides, "paths.output_dir=/tmp/nr-test-out"],
                       return_hydra_config=True)


@pytest.mark.parametrize("overrides", [[], ["+stage=1"], ["+stage=2"], ["task=segment"],
                                       ["debug=fast"], ["logger=wandb"], ["trainer=gpu"]])
def test_train_config_composes(overrides: list[str]) -> None:
    cfg = _compose("train", overrides)
    assert cfg.paths.root_dir
    if "+stage=1" in overrides:
        assert cfg.stage == 1


def test_stage_key_reaches_its_settings() -> None:
    cfg = _compose("train", ["+stage=2"])
    assert str(cfg.stage) in cfg.stages


@pytest.mark.parametrize("dataset", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_every_dataset_config_instantiates(dataset: str) -> None:
    cfg = _compose("evaluate", [f"dataset={dataset}"])
    ds = instantiate(cfg.dataset, _convert_="all")
    assert ds.name == cfg.dataset.name


def test_trainer_node_instantiates() -> None:
    cfg = _compose("train", ["debug=fast"])
    cfg.trainer.default_root_dir = "/tmp/nr-trainer-test"
    trainer = instantiate(cfg.trainer, logger=False)
    assert trainer.max_steps == 2


@pytest.mark.parametrize("name", ["evaluate", "refine"])
def test_other_entry_configs_compose(name: str) -> None:
    cfg = _compose(name, ["image=a.tif", "mask=b.tif"] if name == "refine" else [])
    assert cfg.paths.data_dir.endswith("data")
