"""The judge: the probability that a candidate edit is right, learned from gold.

One gradient-boosted tree model (LightGBM) per candidate kind over the candidate's features
(:func:`neurorefiner.agents.candidates.feature_names`), trained on candidates labelled from gold
(:mod:`neurorefiner.agents.learned.gold_labels`; unlabelled ones, ambiguous or beyond the gold's scope, never
enter). Each kind has its own decision threshold, chosen out of fold. Trees because the features are few,
heterogeneous and the data small (hundreds to thousands of candidates): they train on a CPU in seconds and
need no scaling.

A judge is stored as JSON (LightGBM's own text model inside), never pickled: a file from elsewhere must not
run code when loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.candidates import KINDS, Candidate, feature_names

FORMAT_VERSION = 1
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "binary", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 5,
    "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "lambda_l2": 1.0,
    "verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True,
}
DEFAULT_ROUNDS = 200


def feature_matrix(candidates: Sequence[Candidate], kind: str) -> np.ndarray:
    names = feature_names(kind)
    return np.array([[float(c.features[n]) for n in names] for c in candidates], dtype=np.float64).reshape(-1,
                                                                                                        len(names))


@dataclass
class Judge:
    """Per-kind boosters and thresholds. A kind without a model is judged by ``prior`` (its label rate)."""

    boosters: dict[str, Any]
    thresholds: dict[str, float]
    prior: dict[str, float] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def probabilities(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """P(edit is right) per candidate, in the given order."""
        out = np.zeros(len(candidates))
        for kind in KINDS:
            idx = [i for i, c in enumerate(candidates) if c.kind == kind]
            if not idx:
                continue
            booster = self.boosters.get(kind)
            if booster is None:
                out[idx] = self.prior.get(kind, 0.0)
            else:
                out[idx] = booster.predict(feature_matrix([candidates[i] for i in idx], kind))
        return out

    def decide(self, candidates: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities, whether each passes its kind's threshold)."""
        p = self.probabilities(candidates)
        passed = np.array([p[i] >= self.thresholds.get(c.kind, 1.1) for i, c in enumerate(candidates)], bool)
        return p, passed

    # ------------------------------------------------------------------ storage (JSON, no pickle)
    def to_json(self) -> dict:
        return {"format": FORMAT_VERSION, "meta": self.meta, "prior": self.prior,
                "kinds": {k: {"features": feature_names(k), "threshold": self.thresholds.get(k),
                              "model": None if self.boosters.get(k) is None else self.boosters[k].model_to_string()}
                          for k in KINDS}}

    def save(self, path: str | Path) -> Path:
        from neurorefiner.io.atomic import write_text_atomic

        return write_text_atomic(Path(path), json.dumps(self.to_json()))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "judge") -> Judge:
        import lightgbm as lgb

        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"{source}: judge format {data.get('format')!r}, expected {FORMAT_VERSION}")
        boosters, thresholds = {}, {}
        for kind, node in data.get("kinds", {}).items():
            if kind not in KINDS:
                raise ValueError(f"{source}: unknown candidate kind {kind!r}")
            if list(node.get("features", [])) != feature_names(kind):
                raise ValueError(f"{source}: the {kind} features differ from this code's; retrain the judge")
            if node.get("model"):
                boosters[kind] = lgb.Booster(model_str=node["model"])
            if node.get("threshold") is not None:
                thresholds[kind] = float(node["threshold"])
        return cls(boosters, thresholds, dict(data.get("prior", {})), dict(data.get("meta", {})))

    @classmethod
    def load(cls, path: str | Path) -> Judge:
        from neurorefiner.errors import InputError

        p = Path(path)
        if not p.is_file():
            raise InputError(f"judge file {p} not found (build one: see checkpoints/judge.md)")
        try:
            data = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"judge file {p} is not JSON: {exc}") from None
        try:
            return cls.from_json(data, str(p))
        except ValueError as exc:
            raise InputError(str(exc)) from None


def fit_booster(x: np.ndarray, y: np.ndarray, params: Mapping[str, Any] | None = None,
                rounds: int = DEFAULT_ROUNDS) -> Any:
    """A LightGBM booster on (x, y); None when one class is missing (nothing to learn)."""
    import lightgbm as lgb

    if len(np.unique(y)) < 2:
        return None
    p = {**DEFAULT_PARAMS, **(params or {})}
    pos = float(y.mean())
    p.setdefault("scale_pos_weight", 1.0)
    if 0 < pos < 0.5:
        p["scale_pos_weight"] = min((1 - pos) / pos, 10.0)
    return lgb.train(p, lgb.Dataset(x, label=y.astype(float)), num_boost_round=rounds)


def best_threshold(p: np.ndarray, y: np.ndarray, beta: float = 0.5) -> float:
    """The threshold of largest F-beta (beta < 1 weighs precision: a wrong edit costs more than a missed one,
    and a missed one stays escalated for a person)."""
    if not len(y) or y.sum() == 0:
        return 1.1
    best, best_t = -1.0, 0.5
    for t in np.unique(np.round(p, 3)):
        pred = p >= t
        tp = float((pred & (y == 1)).sum())
        prec = tp / max(pred.sum(), 1)
        rec = tp / max(y.sum(), 1)
        f = (1 + beta ** 2) * prec * rec / max(beta ** 2 * prec + rec, 1e-9)
        if f > best:
            best, best_t = f, float(t)
    return best_t
