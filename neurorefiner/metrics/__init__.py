"""Metrics of the paper: reconstruction metrics on APP2 traces (SD, SSD, %SSD, PRE, REC, F1, MES) and
voxel metrics between masks (Dice, clDice, Betti errors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from neurorefiner.io.swc import Tree
from neurorefiner.metrics.reconstruction import KEYS, score_trees
from neurorefiner.metrics.voxel import betti_errors, cldice, dice

Spacing = tuple[float, float, float]


def score_mask(gold_tree: Tree, mask: np.ndarray, spacing: Spacing = (1.0, 1.0, 1.0),
               gold_mask: np.ndarray | None = None, *, app2_kwargs: dict[str, Any] | None = None,
               return_tree: bool = False, **score_kwargs: Any) -> dict[str, Any]:
    """The evaluation protocol: trace ``mask`` with APP2, score the trace against ``gold_tree``
    (:func:`score_trees`; ``score_kwargs`` e.g. tau, step), plus Dice, clDice and Betti errors when
    ``gold_mask`` is given. ``return_tree`` adds the trace under ``"tree"``."""
    from neurorefiner.tracing.app2 import trace_mask

    mask = np.asarray(mask)
    if gold_mask is not None and np.shape(gold_mask) != mask.shape:
        raise ValueError(f"mask shape {mask.shape} differs from gold mask shape {np.shape(gold_mask)}")
    pred = trace_mask(mask, spacing, **(app2_kwargs or {}))
    out: dict[str, Any] = score_trees(gold_tree, pred, spacing, **score_kwargs)
    if gold_mask is not None:
        out["Dice"] = dice(mask, gold_mask)
        out["clDice"] = cldice(mask, gold_mask)
        out.update(betti_errors(mask, gold_mask))
    if return_tree:
        out["tree"] = pred
    return out


__all__ = ["KEYS", "betti_errors", "cldice", "dice", "score_mask", "score_trees"]
