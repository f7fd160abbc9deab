"""What ``refine.py`` calls: read and check the two inputs, then refine with the agents' loop."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from neurorefiner.errors import exit_on_user_error
from neurorefiner.io import check_same_shape, read_mask, read_volume


@exit_on_user_error
def run(cfg: DictConfig) -> dict:
    image = read_volume(cfg.image)
    mask = read_mask(cfg.mask)
    check_same_shape(image, mask)
    from neurorefiner.agents.run import refine_volume
    from neurorefiner.agents.vlm.client import AgentServerError

    try:
        return refine_volume(image, mask, cfg)
    except AgentServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
