"""What ``evaluate.py`` calls."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from neurorefiner.errors import exit_on_user_error


@exit_on_user_error
def run(cfg: DictConfig) -> list[dict]:
    """Evaluate; returns the rows (a multirun's job hands them to the sweep table, conf/evaluate.yaml).

    A model server that stops answering mid-run (the run checks it before it starts, e.g. Table 4) ends the
    run with one line and exit code 2, like a bad input: every finished volume's rows are kept, so the same
    command continues where it stopped."""
    from hydra.utils import instantiate

    from neurorefiner.agents.roles import RoleError

    dataset = instantiate(cfg.dataset)
    cases = dataset.cases(cfg.split)  # fails clearly when a published dataset is absent
    from neurorefiner.evaluation.runner import evaluate

    try:
        return evaluate(cfg, dataset, cases)
    except RoleError as exc:
        print(f"error: {exc} (finished volumes' rows are kept: the same command continues)", file=sys.stderr)
        sys.exit(2)
