"""Reproduce a benchmark table: ``python evaluate.py dataset=zbfwb`` or ``experiment=<table>``."""

import os
from pathlib import Path

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    from neurorefiner.evaluation.entry import run

    run(cfg)


if __name__ == "__main__":
    main()
