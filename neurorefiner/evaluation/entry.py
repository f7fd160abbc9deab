"""What ``evaluate.py`` calls."""

from __future__ import annotations

from omegaconf import DictConfig

from neurorefiner.errors import exit_on_user_error


@exit_on_user_error
def run(cfg: DictConfig) -> list[dict]:
    """Evaluate; returns the rows (a multirun's job hands them to the sweep table, conf/evaluate.yaml)."""
    from hydra.utils import instantiate

    dataset = instantiate(cfg.dataset)
    cases = dataset.cases(cfg.split)  # fails clearly when a published dataset is absent
    from neurorefiner.evaluation.runner import evaluate

    return evaluate(cfg, dataset, cases)
