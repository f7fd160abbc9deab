"""An average of segmenters trained alike (same recipe, different seeds): one network to the rest of the code.

Why: on DIADEM dev the CPU U-Net's masks depend on the seed as much as on the recipe (OP_5: F1 0.71 with one
seed, 0.78 with another; experiments/segmenters/cv_dev/). Averaging the members' foreground probabilities is
the usual cure (nnU-Net ships fold ensembles); packing the members into one ``nn.Module`` and one checkpoint
keeps ``neurorefiner segment``, the mask caches and the tables unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from neurorefiner.models.segmenters.build import build_from_config

PROB_FLOOR = 1e-6  # log(0) guard; 1e-6 in probability moves no threshold used here


class AveragedEnsemble(nn.Module):
    """Members' softmax probabilities averaged; ``forward`` returns their log, so a softmax over its output
    gives back the average (every consumer of a segmenter takes the softmax of its logits).

    Args:
        members: each member's network recipe (``net_config`` of its checkpoint: ``_target_`` + arguments).
    """

    arch = "ensemble"

    def __init__(self, members: Sequence[dict[str, Any]]):
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least two members, got {len(members)}")
        if any("members" in dict(m) for m in members):
            raise ValueError("ensemble members must be single networks, not ensembles")
        self.members = nn.ModuleList(build_from_config(dict(m)) for m in members)
        limits = [getattr(m, "max_input_size", None) for m in self.members]
        limits = [tuple(int(v) for v in lim) for lim in limits if lim is not None]
        if limits:  # read by inference.max_input_of: the tightest member decides
            self.max_input_size = tuple(min(axis) for axis in zip(*limits, strict=True))

    def averaged_members(self) -> list[nn.Module]:
        """The networks whose probability maps sliding-window inference averages (read by
        ``inference.sliding_window_probs``: each member's windows are blended as its own logits, then the
        maps are averaged, so the result is exactly the mean of the members' maps)."""
        return list(self.members)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.stack([m(x).softmax(dim=1) for m in self.members]).mean(dim=0)
        return probs.clamp_min(PROB_FLOOR).log()
