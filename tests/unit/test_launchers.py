"""The Hydra launchers the README names compose with evaluate.py: joblib on one machine, submitit on a
Slurm cluster (`python evaluate.py -m hydra/launcher=submitit_slurm ...`), with the settings a user would
change reachable from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.mark.parametrize(("launcher", "target", "setting"), [
    ("joblib", "JoblibLauncher", "hydra.launcher.n_jobs=2"),
    ("submitit_slurm", "SlurmLauncher", "hydra.launcher.timeout_min=30"),
    ("submitit_local", "LocalLauncher", "hydra.launcher.timeout_min=30"),
])
def test_launcher_composes_with_evaluate(launcher: str, target: str, setting: str) -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="evaluate", overrides=[f"hydra/launcher={launcher}", setting],
                      return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target)
    key, value = setting.split("=")
    assert str(cfg.hydra.launcher[key.split(".")[-1]]) == value
