"""The Hydra launchers the README names compose with evaluate.py and train.py: joblib on one machine, submitit on a
Slurm cluster (`python evaluate.py -m hydra/launcher=submitit_slurm ...`), with the settings a user would
change reachable from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.cli.launch import show_config_argv

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


def test_launcher_composes_with_train() -> None:
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="train", overrides=["+stage=1", "hydra/launcher=submitit_slurm",
                                                      "hydra.launcher.timeout_min=30"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.timeout_min == 30


ROOT = CONF.parent


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
def test_a_multirun_line_with_cfg_prints_its_first_job(script: str) -> None:
    """``python train.py -m hydra/launcher=submitit_slurm ... --cfg job`` was Hydra's ValueError ("Only one of
    --run, --multirun, --cfg ..."): the way to check a Slurm line before submitting it now prints the first
    job's configuration, launcher included."""
    task = ["+stage=1", "trainer.max_steps=3,4"] if script == "train.py" else ["limit=3,4"]
    out = _run(script, "-m", "hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", *task, "--cfg", "all")
    assert out.returncode == 0, out.stderr[-2000:]
    cfg = OmegaConf.create(out.stdout)
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.partition == "gpu"
    assert (cfg.trainer.max_steps if script == "train.py" else cfg.limit) == 3
    assert "first job" in out.stderr


def test_show_config_argv_leaves_other_lines_alone() -> None:
    line = ["train.py", "-m", "a=1,2", "b=x"]
    assert show_config_argv(line) == line
    assert show_config_argv(["train.py", "a=1,2", "--cfg", "job"]) == ["train.py", "a=1,2", "--cfg", "job"]
    assert show_config_argv(["t.py", "--multirun", "+a=range(2,5)", "b=[1,2]", "-c", "job"]) == \
        ["t.py", "+a=2", "b=[1,2]", "-c", "job"]


@pytest.mark.parametrize(("script", "override", "key"), [
    ("evaluate.py", "paths.log_dir={f}/log", "hydra.run.dir="),
    ("evaluate.py", "out_dir={f}/x", "out_dir="),
    ("train.py", "paths.checkpoint_dir={f}/x", "paths.checkpoint_dir="),
    ("refine.py", "paths.log_dir={f}/log", "hydra.run.dir="),
    ("train.py", "segmentation.export_path={f}/x.pt", "segmentation.export_path="),
])
def test_an_output_folder_under_a_file_is_one_line_before_the_run(tmp_path: Path, script: str, override: str,
                                                                  key: str) -> None:
    """A run folder under a file was a NotADirectoryError from inside Hydra (evaluate.py, train.py, refine.py)."""
    blocker = tmp_path / "f"
    blocker.write_text("x")
    task = {"train.py": ["+stage=1"], "evaluate.py": ["dataset=tiny"],
            "refine.py": ["image=i.tif", "mask=m.tif", f"out={tmp_path / 'out'}"]}[script]
    logs = [] if "log_dir" in override else [f"paths.log_dir={tmp_path}/logs"]
    out = _run(script, *task, *logs, override.format(f=blocker))
    err = out.stderr.strip()
    assert out.returncode == 2 and len(err.splitlines()) == 1, err
    assert f"{key} sits under {blocker}, which is a file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
