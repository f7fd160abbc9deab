"""Refine one user volume: ``python refine.py image=stack.tif mask=seg.tif``."""

import os
from pathlib import Path

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="refine")
def main(cfg: DictConfig) -> None:
    from neurorefiner.refine.entry import run

    run(cfg)


if __name__ == "__main__":
    import sys

    from neurorefiner.cli.choices import check_choices

    check_choices(sys.argv, Path(__file__).resolve().parent / "conf")  # a group choice not in conf/: exit 2
    main()
