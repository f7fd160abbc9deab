"""What ``evaluate.py`` calls."""

from __future__ import annotations

from omegaconf import DictConfig

from neurorefiner.errors import MissingPieceError, exit_on_user_error


@exit_on_user_error
def run(cfg: DictConfig) -> None:
    from hydra.utils import instantiate

    dataset = instantiate(cfg.dataset)
    cases = dataset.cases(cfg.split)  # fails clearly when a published dataset is absent
    try:
        from neurorefiner.evaluation.runner import evaluate
    except ModuleNotFoundError as exc:
        raise MissingPieceError(f"the evaluation runner has not landed; {len(cases)} {cfg.dataset.name} "
                                f"cases are ready") from exc
    evaluate(cfg, dataset, cases)
