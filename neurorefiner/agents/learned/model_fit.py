"""Fitting a judge model of a named type on mined candidates, and choosing its threshold without the data it
is scored on: the one rule the shipped judge (:func:`neurorefiner.agents.learned.training.train_table_judge`) and
its leave-one-dataset-out figures (:mod:`neurorefiner.studies.judge_transfer`) share.

Predictions for training candidates their model did not see: leave one training dataset out (one training dataset:
leave one stack out), for every model type alike (the network included: a quarter of the stacks held out in one
split gave it thresholds from one or two datasets, and leave one dataset out it flagged nearly every join).

Threshold (:func:`robust_threshold`): the kind's precision floor must hold on *each* training dataset's held-out
predictions, not only pooled. The datasets' base rates differ (nine in ten joins of a defect-cut gold mask are
right, two in three of a DIADEM mask's): a pooled threshold is set by the easy datasets and, leave one dataset
out, flagged nearly every join of the hard one (precision = its base rate; experiments/judge/).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neurorefiner.agents.learned.judge import best_threshold
from neurorefiner.agents.learned.mining import CandidateTable

MODELS = ("logistic", "lgbm", "crop_lgbm", "crop_net")


def fit(model: str, t: CandidateTable, seed: int = 0, epochs: int = 12) -> Any:
    """A model of the named type on table ``t`` (None when one class is missing)."""
    from neurorefiner.agents.learned.judge import CropBooster, fit_booster, fit_model

    if model in ("logistic", "lgbm"):
        return fit_model(t.x, t.y, model)
    if model == "crop_lgbm":
        b = fit_booster(CropBooster.inputs(t.x, t.crops), t.y)
        return None if b is None else CropBooster(b)
    if model == "crop_net":
        from neurorefiner.agents.learned.crop_net import fit_crop_net

        return fit_crop_net(t.x, t.y, t.crops, epochs=epochs, seed=seed)
    raise ValueError(f"unknown judge model {model!r}; known: {MODELS}")


def predict(m: Any, t: CandidateTable) -> np.ndarray:
    if m is None:
        return np.full(len(t), 0.0)
    if getattr(m, "uses_crops", False):
        return m.predict(t.x, t.crops)
    return m.predict(t.x)


def robust_threshold(p: np.ndarray, y: np.ndarray, families: np.ndarray, min_precision: float,
                     min_support: int = 10) -> float:
    """The highest of the pooled threshold and each dataset's own (the lowest keeping ``min_precision`` there);
    datasets with fewer than ``min_support`` candidates, no true one, or no threshold reaching the floor do not
    set it (a dataset where nothing reaches the floor would silence the kind everywhere)."""
    thr = best_threshold(p, y, min_precision, min_support)
    for f in sorted(set(np.asarray(families).tolist())):
        sel = np.asarray(families) == f
        if sel.sum() < min_support or not y[sel].any():
            continue
        t_f = best_threshold(p[sel], y[sel], min_precision, min_support)
        if t_f <= 1.0:
            thr = t_f if thr > 1.0 else max(thr, t_f)
    return float(thr)


def inner_threshold(model: str, train: CandidateTable, min_precision: float, min_support: int = 10,
                    seed: int = 0, epochs: int = 12) -> tuple[Any, float, np.ndarray, np.ndarray]:
    """(model, threshold, inner held-out probabilities, their labels) from ``train`` alone (module docstring)."""
    fams = train.families
    folds = fams if len(set(fams.tolist())) >= 2 else train.group  # one training dataset: its stacks
    oof = np.full(len(train), float(train.y.mean()) if len(train) else 0.0)
    for f in sorted(set(folds.tolist())):
        sel = folds == f
        m_f = fit(model, train.subset(~sel), seed, epochs) if (~sel).any() else None
        if m_f is not None:
            oof[sel] = predict(m_f, train.subset(sel))
    m = fit(model, train, seed, epochs)
    return m, robust_threshold(oof, train.y, fams, min_precision, min_support), oof, train.y


