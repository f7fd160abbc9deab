"""The experiment loggers named by ``cfg.logger`` (one node with ``_target_``, or a group of them), built
once for every training task."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def build_loggers(cfg: DictConfig) -> list[Any]:
    """Instantiate ``cfg.logger``: nothing when unset, one logger for a node with ``_target_``, else every
    child node that has one (``logger: {csv: ..., wandb: ...}``)."""
    from hydra.utils import instantiate

    node = cfg.get("logger")
    if not node:
        return []
    if "_target_" in node:
        return [instantiate(node)]
    return [instantiate(v) for v in node.values() if v is not None and "_target_" in v]
