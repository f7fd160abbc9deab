"""Fitting a judge model of a named type on labelled candidates, and choosing its threshold without the data it
is scored on: the one rule the shipped judge (:func:`.table_training.train_table_judge`) and its
leave-one-dataset-out figures (:mod:`neurorefiner.studies.judge_transfer`) share.

Predictions for training candidates their model did not see: leave one training dataset out (one training dataset:
leave one stack out), for every model type alike (the network included: a quarter of the stacks held out in one
split gave it thresholds from one or two datasets, and leave one dataset out it flagged nearly every join).

Threshold (:func:`robust_threshold`): the kind's precision floor must hold on *each* training dataset's held-out
predictions, not only pooled. The datasets' base rates differ (nine in ten joins of a defect-cut gold mask are
right, two in three of a DIADEM mask's): a pooled threshold is set by the easy datasets and, leave one dataset
out, flagged nearly every join of the hard one (precision = its base rate; experiments/judge/).

Also every model type the judge stores (a run only predicts with them) and the threshold rules (floors
:data:`MIN_PRECISION`; :func:`choose_threshold` picks the rule and names it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from neurorefiner.adaptation.judge.mining import CandidateTable
from neurorefiner.agents.learned.judge import CropBooster, LogisticModel

if TYPE_CHECKING:
    import torch

    from neurorefiner.agents.learned.crop_net import CropNetModel

MIN_PRECISION = {"join": 0.8, "remove": 0.9, "prune": 0.9}
"""Out-of-fold precision a kind's threshold must keep: a wrong edit costs more than a missed one (a missed one
stays escalated for a person), and a wrong join or prune damages the traced tree."""


def best_threshold(p: np.ndarray, y: np.ndarray, min_precision: float = 0.8, min_support: int = 1) -> float:
    """The lowest threshold whose out-of-fold precision is at least ``min_precision`` over every threshold
    above it too (the most recall at that precision); 1.1 (never act) when none reaches it.

    ``min_support``: thresholds admitting fewer candidates than this are not held to the floor. With a few
    stacks one wrong candidate scored highest makes the precision at the top 0 and, under the every-threshold-
    above rule, silences a kind that is right 95 % of the time (the 2-stack val split of a stand-in: 44 of 46
    joins true, none flagged). 1 keeps the strict rule (what the shipped DIADEM judge was trained with)."""
    if not len(y) or y.sum() == 0:
        return 1.1
    order = np.argsort(-p, kind="stable")
    ps, ys = p[order], y[order]
    tp = np.cumsum(ys == 1)
    prec = tp / np.arange(1, len(ys) + 1)
    best = 1.1
    for i in range(len(ps)):
        if i + 1 < len(ps) and ps[i + 1] == ps[i]:
            continue  # a threshold admits all tied scores at once
        if prec[i] < min_precision:
            if i + 1 >= min_support:
                break
            continue
        best = float(ps[i])
    return best


FALLBACK_BETA = 0.5
"""F-beta the threshold falls back to when no threshold keeps the precision floor: beta 0.5 weighs precision
twice (a wrong edit costs more than a missed one), yet the kind still acts where it ranks better than chance."""


MIN_FALLBACK_PRECISION = 0.5
"""The fallback acts only where its edits are more often right than wrong (SYNTHETIC cwmbs_noise's prunes: the
best F0.5 was 8.5 % precise); below, the kind never acts, and the card and the log say why."""


@dataclass(frozen=True)
class ThresholdChoice:
    """A kind's threshold with the rule that set it and what it admits of the candidates it was set on."""

    threshold: float
    rule: str
    admitted: int = 0
    precision: float = 0.0
    recall: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "rule": self.rule, "admitted": self.admitted,
                "precision": self.precision, "recall": self.recall}


def admitted_threshold(p: np.ndarray, y: np.ndarray, min_precision: float, min_admitted: int = 1) -> float:
    """The lowest threshold whose admitted candidates (at least ``min_admitted`` of them) are right at
    ``min_precision``: the most recall at that precision, with no condition on the thresholds above it (the
    rule the calibration on a lab's few labels uses). 1.1 when none is."""
    if not len(y) or y.sum() == 0:
        return 1.1
    order = np.argsort(-p, kind="stable")
    ps, ys = p[order], y[order]
    prec = np.cumsum(ys == 1) / np.arange(1, len(ys) + 1)
    last = np.r_[ps[1:] != ps[:-1], True]          # a threshold admits all tied scores at once
    ok = last & (prec >= min_precision) & (np.arange(1, len(ys) + 1) >= min_admitted)
    return float(ps[np.flatnonzero(ok)[-1]]) if ok.any() else 1.1


def best_fbeta_threshold(p: np.ndarray, y: np.ndarray, beta: float = FALLBACK_BETA) -> float:
    """The threshold of the best F-beta on ``(p, y)``; 1.1 when no candidate is right."""
    if not len(y) or y.sum() == 0:
        return 1.1
    order = np.argsort(-p, kind="stable")
    ps, ys = p[order], y[order]
    tp = np.cumsum(ys == 1)
    prec, rec = tp / np.arange(1, len(ys) + 1), tp / ys.sum()
    b2 = beta * beta
    f = np.where(tp > 0, (1 + b2) * prec * rec / np.maximum(b2 * prec + rec, 1e-12), 0.0)
    f[np.r_[ps[1:] == ps[:-1], False]] = -1.0      # only thresholds that admit every tied score
    return float(ps[int(np.argmax(f))])


def _admits(p: np.ndarray, y: np.ndarray, t: float, rule: str) -> ThresholdChoice:
    admitted = p >= t
    tp = int((admitted & (y == 1)).sum())
    return ThresholdChoice(float(t), rule, int(admitted.sum()), tp / max(int(admitted.sum()), 1),
                           tp / max(int((y == 1).sum()), 1))


def choose_threshold(p: np.ndarray, y: np.ndarray, min_precision: float, min_support: int = 1) -> ThresholdChoice:
    """A kind's threshold from out-of-fold probabilities, never a silent "never act".

    With ``min_support`` 1, the strict rule (:func:`best_threshold`: the floor at every threshold above), which
    keeps every judge trained before this rule existed (DIADEM's) as it was; with a larger support (a few
    stacks), the lowest threshold whose admitted set, at least ``min_support`` candidates, keeps the floor
    (:func:`admitted_threshold`: the most recall at the floor; the strict rule stopped at the first dip and
    left SYNTHETIC zbfwb's joins at 27.5 % recall). Where neither finds one, the best F-beta
    (:data:`FALLBACK_BETA`): a kind below its floor, which the rule's name says, as long as it is right at least
    :data:`MIN_FALLBACK_PRECISION` of the time; else it never acts, and the rule says why."""
    if not len(y) or y.sum() == 0:
        return ThresholdChoice(1.1, "never: no candidate of this kind is right")
    if min_support <= 1:
        strict = best_threshold(p, y, min_precision, min_support)
        if strict <= 1.0:
            return _admits(p, y, strict, f"precision floor {min_precision:.2f} at every threshold above")
    else:
        admitted = admitted_threshold(p, y, min_precision, min_support)
        if admitted <= 1.0:
            return _admits(p, y, admitted, f"precision floor {min_precision:.2f} on the admitted set "
                                           f"({min_support}+ candidates)")
    fallback = _admits(p, y, best_fbeta_threshold(p, y),
                       f"fallback: best F{FALLBACK_BETA:g} (no threshold admitting {min_support}+ keeps the floor "
                       f"{min_precision:.2f})")
    if fallback.precision < MIN_FALLBACK_PRECISION:  # an edit more often wrong than right: say so, never act
        return ThresholdChoice(1.1, f"never: even the best F{FALLBACK_BETA:g} threshold is right only "
                                    f"{100 * fallback.precision:.1f} % of the time (below "
                                    f"{100 * MIN_FALLBACK_PRECISION:.0f} %)", fallback.admitted, fallback.precision,
                               fallback.recall)
    return fallback


DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "binary", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 5,
    "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0,
    "verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True,
}
DEFAULT_ROUNDS = 200


def balanced_weights(y: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """Sample weights whose total per class is half the sample count: scikit-learn's ``balanced`` classes when
    every weight is one; otherwise each class keeps its weights' proportions (a join that adds 300 um of traced
    neurite counts for more than one that adds 3) and the classes still weigh alike."""
    w = np.ones(len(y)) if weight is None else np.asarray(weight, float).copy()
    w = np.maximum(w, 1e-6)
    for cls in (0, 1):
        sel = y == cls
        if sel.any():
            w[sel] *= len(y) / (2.0 * w[sel].sum())
    return w


def fit_logistic(x: np.ndarray, y: np.ndarray, c: float = 0.3, weight: np.ndarray | None = None
                 ) -> LogisticModel | None:
    """A standardised logistic regression on (x, y) (:class:`LogisticModel`); None when one class is missing."""
    from sklearn.linear_model import LogisticRegression

    if len(np.unique(y)) < 2:
        return None
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    m = LogisticRegression(C=c, max_iter=2000).fit((x - mean) / scale, y, sample_weight=balanced_weights(y, weight))
    return LogisticModel(mean, scale, m.coef_[0], float(m.intercept_[0]))


def fit_model(x: np.ndarray, y: np.ndarray, model: str = "logistic", rounds: int = 0,
              weight: np.ndarray | None = None) -> Any:
    """A model of the named type on (x, y), each sample weighted by ``weight`` (None: alike); None when one class
    is missing."""
    if model == "logistic":
        return fit_logistic(x, y, weight=weight)
    if model == "lgbm":
        return fit_booster(x, y, rounds=rounds or DEFAULT_ROUNDS, weight=weight)
    raise ValueError(f"judge model must be 'logistic' or 'lgbm', got {model!r}")


def fit_booster(x: np.ndarray, y: np.ndarray, params: Mapping[str, Any] | None = None,
                rounds: int = DEFAULT_ROUNDS, weight: np.ndarray | None = None) -> Any:
    """A LightGBM booster on (x, y); None when one class is missing (nothing to learn)."""
    import lightgbm as lgb

    if len(np.unique(y)) < 2:
        return None
    p = {**DEFAULT_PARAMS, **(params or {})}
    pos = float(y.mean())
    p.setdefault("scale_pos_weight", 1.0)
    if 0 < pos < 0.5:
        p["scale_pos_weight"] = min((1 - pos) / pos, 10.0)
    return lgb.train(p, lgb.Dataset(x, label=y.astype(float), weight=weight), num_boost_round=rounds)


def _flip(c: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    import torch

    for axis in (2, 3, 4):
        if torch.rand(1, generator=gen).item() < 0.5:
            c = torch.flip(c, dims=(axis,))
    if torch.rand(1, generator=gen).item() < 0.5:
        c = c.transpose(3, 4)  # y and x share one spacing on the crop's grid
    return c


def fit_crop_net(x: np.ndarray, y: np.ndarray, crops: np.ndarray, epochs: int = 12, batch: int = 64,
                 lr: float = 3e-3, seed: int = 0, channels: tuple[int, ...] = (8, 16, 32), hidden: int = 32,
                 sample_weight: np.ndarray | None = None, progress: bool = False) -> CropNetModel | None:
    """Train on (hand features ``x``, labels ``y``, uint8 ``crops``); None when one class is missing."""
    import torch
    from torch import nn

    from neurorefiner.agents.learned.crop_net import CropNet, CropNetModel
    from neurorefiner.agents.learned.crops import as_float

    y = np.asarray(y).astype(np.float32)
    if len(np.unique(y)) < 2:
        return None
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    mean, scale = x.mean(axis=0).astype(np.float32), x.std(axis=0).astype(np.float32)
    scale[scale < 1e-6] = 1.0
    arch: dict[str, Any] = {"n_features": int(x.shape[1]), "channels": list(channels), "hidden": hidden}
    net = CropNet(x.shape[1], channels, hidden)
    model = CropNetModel(net, mean, scale, arch)
    feats = model.scaled_features(x)
    pos = float(y.mean())
    w = np.where(y == 1, 0.5 / max(pos, 1e-3), 0.5 / max(1 - pos, 1e-3)).astype(np.float32)
    if sample_weight is not None:
        w = w * np.asarray(sample_weight, np.float32)
    wt, yt = torch.from_numpy(w), torch.from_numpy(y)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-3)
    steps = epochs * int(np.ceil(len(y) / batch))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1))
    from tqdm import tqdm

    net.train()
    for _ in tqdm(range(epochs), desc="crop net", unit="epoch", disable=not progress):
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch):
            idx = order[i:i + batch]
            if len(idx) < 2:
                continue
            c = _flip(torch.from_numpy(as_float(crops[idx.numpy()])), gen)
            loss = nn.functional.binary_cross_entropy_with_logits(net(c, feats[idx]), yt[idx], weight=wt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    net.eval()
    return model


MODELS = ("logistic", "lgbm", "crop_lgbm", "crop_net")


def fit(model: str, t: CandidateTable, seed: int = 0, epochs: int = 12) -> Any:
    """A model of the named type on table ``t`` (None when one class is missing)."""
    if model in ("logistic", "lgbm"):
        return fit_model(t.x, t.y, model)
    if model == "crop_lgbm":
        b = fit_booster(CropBooster.inputs(t.x, t.crops), t.y)
        return None if b is None else CropBooster(b)
    if model == "crop_net":
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
