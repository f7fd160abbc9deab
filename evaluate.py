"""Reproduce a benchmark table: ``python evaluate.py dataset=zbfwb`` or ``experiment=<table>``; a sweep
``python evaluate.py -m method_registry.neurorefiner.t_max=1,2,3`` also writes one merged table of all its jobs
in the sweep dir (``sweep_table.md``, :mod:`neurorefiner.evaluation.sweep`)."""

import os
from pathlib import Path

os.environ.setdefault("PROJECT_ROOT", str(Path(__file__).resolve().parent))

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> list[dict]:
    from neurorefiner.evaluation.entry import run

    return run(cfg)  # the rows: in a multirun each job's go to the sweep's merged table (hydra.callbacks)


if __name__ == "__main__":
    import sys

    from neurorefiner.cli.choices import check_choices
    from neurorefiner.cli.launch import show_config_argv

    check_choices(sys.argv, Path(__file__).resolve().parent / "conf")  # a group choice not in conf/: exit 2
    sys.argv = show_config_argv(sys.argv)  # `-m ... --cfg job`: the first job's config (Hydra refuses both)
    main()
