"""The judge: the probability that a candidate edit is right, learned from gold.

One model per candidate kind over the candidate's features
(:func:`neurorefiner.agents.candidates.feature_names`), trained on candidates labelled from gold
(:mod:`neurorefiner.adaptation.judge.gold_labels`; unlabelled ones, ambiguous or beyond the gold's scope, never
enter). Each kind has its own decision threshold, chosen out of fold. The model type per kind (gradient-boosted
trees, LightGBM; or a standardised logistic regression) is the one that wins leave-one-stack-out on DIADEM dev;
both train on a CPU in seconds, offline (:mod:`neurorefiner.adaptation.judge`); a run only predicts.

A judge is stored as JSON (LightGBM's own text model inside) or, when a model reads the candidates' image crops
(:mod:`neurorefiner.agents.learned.crop_net`, ``crop_lgbm``), as a ``.pt`` file of plain tensors, numbers and
strings loaded with ``torch.load(weights_only=True)``; never pickled: a file from elsewhere must not run code
when loaded. A model that reads crops is handed them by :meth:`Judge.probabilities` (``view``: the image and
mask the candidates were found on), computed only when some model needs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.candidates import KINDS, Candidate, feature_names, known_features

FORMAT_VERSION = 1
FORMAT_VERSION_CROPS = 2
def feature_matrix(candidates: Sequence[Candidate], kind: str, names: Sequence[str] | None = None) -> np.ndarray:
    """The candidates' features as rows, in ``names``' order (default: :func:`feature_names`, what a judge trained
    now reads)."""
    names = list(names) if names is not None else feature_names(kind)
    return np.array([[float(c.features[n]) for n in names] for c in candidates], dtype=np.float64).reshape(-1,
                                                                                                        len(names))


class LogisticModel:
    """Standardised logistic regression, stored as numbers (JSON), never pickled. On a few hundred
    candidates from a handful of stacks a linear score carries over to an unseen stack better than trees,
    which learn one stack's peculiarities (measured leave-one-stack-out, ``neurorefiner study ceilings``)."""

    def __init__(self, mean: np.ndarray, scale: np.ndarray, coef: np.ndarray, intercept: float) -> None:
        self.mean, self.scale = np.asarray(mean, float), np.asarray(scale, float)
        self.coef, self.intercept = np.asarray(coef, float), float(intercept)

    def predict(self, x: np.ndarray) -> np.ndarray:
        z = ((np.asarray(x, float) - self.mean) / self.scale) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> dict:
        return {"type": "logistic", "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "coef": self.coef.tolist(), "intercept": self.intercept}


class CropBooster:
    """LightGBM over the hand features and the crop's own statistics
    (:func:`neurorefiner.agents.learned.crop_features.crop_features`)."""

    uses_crops = True

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    @staticmethod
    def inputs(x: np.ndarray, crops: np.ndarray) -> np.ndarray:
        from neurorefiner.agents.learned.crop_features import crop_features

        return np.hstack([np.asarray(x, np.float64), crop_features(crops)])

    def predict(self, x: np.ndarray, crops: np.ndarray) -> np.ndarray:
        return self.booster.predict(self.inputs(x, crops))


@dataclass(frozen=True)
class CropView:
    """What the candidates were found on, for models that read their crops."""

    image: np.ndarray
    mask: np.ndarray
    spacing: tuple[float, float, float]
    levels: tuple[float, float]

    def crops(self, candidates: Sequence[Candidate]) -> np.ndarray:
        from neurorefiner.agents.learned.crops import candidate_crops

        return candidate_crops(self.image, self.mask, candidates, self.spacing, self.levels)


def _model_json(model: Any) -> dict | None:
    if model is None:
        return None
    if isinstance(model, LogisticModel):
        return model.to_json()
    if isinstance(model, CropBooster):
        return {"type": "crop_lgbm", "text": model.booster.model_to_string()}
    if hasattr(model, "to_state"):
        return model.to_state()
    return {"type": "lgbm", "text": model.model_to_string()}


def _model_from_json(node: Any) -> Any:
    import lightgbm as lgb

    if not node:
        return None
    if node.get("type") == "logistic":
        return LogisticModel(node["mean"], node["scale"], node["coef"], node["intercept"])
    if node.get("type") == "lgbm":
        return lgb.Booster(model_str=node["text"])
    if node.get("type") == "crop_lgbm":
        return CropBooster(lgb.Booster(model_str=node["text"]))
    if node.get("type") == "crop_net":
        from neurorefiner.agents.learned.crop_net import CropNetModel

        return CropNetModel.from_state(node)
    raise ValueError(f"unknown judge model type {node.get('type')!r}")


@dataclass
class Judge:
    """Per-kind models (``boosters``: LightGBM boosters or :class:`LogisticModel`; anything with ``predict``)
    and thresholds. A kind without a model is judged by ``prior`` (its label rate)."""

    boosters: dict[str, Any]
    thresholds: dict[str, float]
    prior: dict[str, float] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    columns: dict[str, list[str]] = field(default_factory=dict)
    """Each kind's feature names in its model's order (default: :func:`feature_names`); a stored judge keeps the
    columns it was trained on, so adding a feature does not retire it."""

    def names(self, kind: str) -> list[str]:
        return list(self.columns.get(kind) or feature_names(kind))

    @property
    def uses_crops(self) -> bool:
        return any(getattr(b, "uses_crops", False) for b in self.boosters.values())

    def probabilities(self, candidates: Sequence[Candidate], view: CropView | None = None) -> np.ndarray:
        """P(edit is right) per candidate, in the given order (``view``: needed by models that read crops)."""
        out = np.zeros(len(candidates))
        for kind in KINDS:
            idx = [i for i, c in enumerate(candidates) if c.kind == kind]
            if not idx:
                continue
            booster = self.boosters.get(kind)
            if booster is None:
                out[idx] = self.prior.get(kind, 0.0)
            elif getattr(booster, "uses_crops", False):
                if view is None:
                    raise ValueError(f"the {kind} model reads image crops: pass the view the candidates came from")
                picked = [candidates[i] for i in idx]
                out[idx] = booster.predict(feature_matrix(picked, kind, self.names(kind)), view.crops(picked))
            else:
                out[idx] = booster.predict(feature_matrix([candidates[i] for i in idx], kind, self.names(kind)))
        return out

    def decide(self, candidates: Sequence[Candidate], view: CropView | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(probabilities, whether each passes its kind's threshold)."""
        p = self.probabilities(candidates) if view is None else self.probabilities(candidates, view)
        passed = np.array([p[i] >= self.thresholds.get(c.kind, 1.1) for i, c in enumerate(candidates)], bool)
        return p, passed

    # ------------------------------------------------------------------ storage (JSON, no pickle)
    def to_json(self) -> dict:
        return {"format": FORMAT_VERSION_CROPS if self.uses_crops else FORMAT_VERSION, "meta": self.meta,
                "prior": self.prior,
                "kinds": {k: {"features": self.names(k), "threshold": self.thresholds.get(k),
                              "model": _model_json(self.boosters.get(k))}
                          for k in KINDS}}

    def save(self, path: str | Path) -> Path:
        """JSON, or a weights-only ``.pt`` (required when a model reads crops: its weights are tensors)."""
        path = Path(path)
        if path.suffix == ".pt":
            import torch

            from neurorefiner.io.atomic import atomic_path

            data = self.to_json()
            data["meta"] = json.loads(json.dumps(data["meta"]))  # plain types only: weights_only loads it
            with atomic_path(path) as tmp:
                torch.save(data, tmp)
            return path
        if self.uses_crops:
            raise ValueError(f"{path}: a judge whose models read crops is stored as .pt")
        from neurorefiner.io.atomic import write_text_atomic

        return write_text_atomic(path, json.dumps(self.to_json()))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "judge") -> Judge:
        if data.get("format") not in (FORMAT_VERSION, FORMAT_VERSION_CROPS):
            raise ValueError(f"{source}: judge format {data.get('format')!r}, expected {FORMAT_VERSION} or "
                             f"{FORMAT_VERSION_CROPS}")
        boosters, thresholds, columns = {}, {}, {}
        for kind, node in data.get("kinds", {}).items():
            if kind not in KINDS:
                raise ValueError(f"{source}: unknown candidate kind {kind!r}")
            columns[kind] = list(node.get("features", []))
            unknown = sorted(set(columns[kind]) - known_features(kind))
            if unknown or not columns[kind]:
                raise ValueError(f"{source}: the {kind} model reads features this code does not compute "
                                 f"({', '.join(unknown) or 'none listed'}); retrain the judge")
            if node.get("model"):
                boosters[kind] = _model_from_json(node["model"])
            if node.get("threshold") is not None:
                thresholds[kind] = float(node["threshold"])
        return cls(boosters, thresholds, dict(data.get("prior", {})), dict(data.get("meta", {})), columns)

    @classmethod
    def load(cls, path: str | Path) -> Judge:
        from neurorefiner.errors import InputError

        p = Path(path)
        if not p.is_file():
            raise InputError(f"judge file {p} not found (build one: see checkpoints/judge.md)")
        if p.suffix == ".pt":
            import pickle

            import torch

            try:
                data = torch.load(p, map_location="cpu", weights_only=True)
            except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
                raise InputError(f"judge file {p} is not a weights-only judge: {str(exc).splitlines()[0]}") from None
            try:
                return cls.from_json(data, str(p))
            except (ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{p}: {exc}") from None
        try:
            data = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"judge file {p} is not JSON: {exc}") from None
        try:
            return cls.from_json(data, str(p))
        except ValueError as exc:
            raise InputError(str(exc)) from None


