"""What ``train.py`` calls: pick the training function for ``task`` and run it.

The functions live beside this module (``training.refiner``, ``training.segmenter``); this one only routes,
seeds, and turns a bad setting into one clear line.
"""

from __future__ import annotations

import importlib

from omegaconf import DictConfig

from neurorefiner.errors import InputError, exit_on_user_error

TASKS = {
    "refine": ("neurorefiner.training.refiner", "train_refiner"),  # TopoRefineNet, stage 1 or 2
    "segment": ("neurorefiner.training.segmenter", "train_segmenter"),  # a baseline segmenter
    "baseline": ("neurorefiner.training.refinement_baselines", "train_baseline"),  # SegFix/SegRefiner/Transfiner
}


def resolve_task(cfg: DictConfig):  # type: ignore[no-untyped-def]
    """The training function for ``cfg.task``; raises a clear error for an unknown task or a missing stage."""
    task = cfg.get("task", "refine")
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; use one of {sorted(TASKS)}")
    if task == "refine":
        stage = cfg.get("stage")
        if stage is None:
            raise InputError("TopoRefineNet is trained in two stages: run `python train.py +stage=1`, "
                             "then `python train.py +stage=2`")
        stages = cfg.get("stages") or {}
        if str(stage) not in stages:
            raise InputError(f"unknown stage {stage!r}; stages are {sorted(stages)}")
    module_name, fn_name = TASKS[task]
    return getattr(importlib.import_module(module_name), fn_name)


def objective(cfg: DictConfig, metrics: dict) -> float | None:
    """The number a Hydra sweeper optimises: ``metrics[cfg.optimized_metric]`` (``val/pick``, the validation
    score that picked the checkpoint, in ``conf/hparams_search/``); None when no metric is named."""
    name = cfg.get("optimized_metric")
    if not name:
        return None
    if name not in metrics:
        raise InputError(f"optimized_metric {name!r} is not among this run's metrics {sorted(metrics)}")
    return float(metrics[name])


def train(cfg: DictConfig) -> float | None:
    """What ``train.py`` calls: train, print the metrics, return the sweep objective (if one is named)."""
    return objective(cfg, run(cfg))


@exit_on_user_error
def run(cfg: DictConfig) -> dict:
    import lightning

    lightning.seed_everything(int(cfg.get("seed", 0)), workers=True)
    fn = resolve_task(cfg)
    metrics = fn(cfg) or {}
    for key, value in metrics.items():
        print(f"{key}: {value}")
    return metrics
