"""What ``refine.py`` calls: refine one user volume with the agents' loop."""

from __future__ import annotations

from omegaconf import DictConfig

from neurorefiner.errors import MissingPieceError, exit_on_user_error
from neurorefiner.io import check_same_shape, read_mask, read_volume


@exit_on_user_error
def run(cfg: DictConfig) -> None:
    image = read_volume(cfg.image)
    mask = read_mask(cfg.mask)
    check_same_shape(image, mask)
    try:
        from neurorefiner.agents.loop import refine_volume
    except (ModuleNotFoundError, ImportError) as exc:
        raise MissingPieceError("the agents' refinement loop (neurorefiner.agents.loop) has not landed; "
                                "inputs were read and checked") from exc
    refine_volume(image, mask, cfg)
