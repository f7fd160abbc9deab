"""Train TopoRefineNet (``python train.py +stage=1`` / ``+stage=2``) or a baseline segmenter
(``python train.py task=segment model=unet3d``). Composes the config and calls one function."""

import os
from pathlib import Path

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from neurorefiner.training.entry import train

    return train(cfg)  # the sweep objective (hparams_search/): None unless optimized_metric is set


if __name__ == "__main__":
    import sys

    from neurorefiner.cli.choices import check_choices
    from neurorefiner.cli.launch import show_config_argv

    check_choices(sys.argv, Path(__file__).resolve().parent / "conf")  # a group choice not in conf/: exit 2
    sys.argv = show_config_argv(sys.argv)  # `-m ... --cfg job`: the first job's config (Hydra refuses both)
    main()
