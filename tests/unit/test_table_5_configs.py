"""Table 5's configs: the Inspector's inputs are the only thing its rows change, on DIADEM and on the stand-ins,
with the learned agents (today's default) and each stand-in's own refiner."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.evaluation.methods import method_node

ROOT = Path(__file__).resolve().parents[2]
ROWS = {"nr_inputs_mip_only": ["global_mip"], "nr_inputs_mip_blocks": ["global_mip", "block_mips"],
        "nr_inputs_mip_betti0": ["global_mip", "betti0"]}


@pytest.mark.parametrize(("experiment", "dataset"), [
    ("table_5_inspector_inputs", "diadem"),
    ("table_5_inspector_inputs_synthetic_cwmbs_noise", "synthetic_cwmbs_noise"),
    ("table_5_inspector_inputs_synthetic_zbfwb", "synthetic_zbfwb")])
def test_rows_differ_only_in_the_inspectors_inputs(experiment: str, dataset: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="evaluate", overrides=[f"experiment={experiment}", "paths.output_dir=/tmp/nr-t5"])
    assert cfg.dataset.name == dataset and cfg.table.name == experiment
    assert ("SYNTHETIC" in cfg.table.title) == dataset.startswith("synthetic_")
    full = OmegaConf.to_container(method_node(cfg, "neurorefiner"), resolve=True)
    assert full["agent"]["inspector"]["_target_"].endswith("LearnedInspector")
    if dataset != "diadem":
        assert dataset in full["agent"]["inspector"]["judge"]   # the preset's own judge
    for name, inputs in ROWS.items():
        node = OmegaConf.to_container(method_node(cfg, name), resolve=True)
        assert node["loop"].pop("inspector_inputs") == inputs
        full_loop = {k: v for k, v in full["loop"].items() if k != "inspector_inputs"}
        assert node["loop"] == full_loop and node["agent"] == full["agent"], name
