"""Training the judge: candidates of real segmenters' masks labelled from gold, fitted per kind, with
thresholds and every reported figure out of fold (leave one stack out).

A *group* is a stack (DIADEM OP_k, or a synthetic volume): both segmenters' masks of one stack are held out
together, so a figure is never computed on a stack whose other mask was trained on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurorefiner.adaptation.judge.augment import GoldCase, augmented_masks
from neurorefiner.adaptation.judge.gold_labels import (
    GoldIndex,
    LabelSettings,
    attached_piece_labels,
    join_values,
    label_all,
)
from neurorefiner.adaptation.judge.model_fit import MIN_PRECISION, ThresholdChoice, choose_threshold, fit_model
from neurorefiner.agents.candidates import KINDS, Candidate, CandidateSettings, feature_names, find_candidates
from neurorefiner.agents.learned.judge import Judge, feature_matrix
from neurorefiner.topology.tree_root import TREE_ROOTS


@dataclass
class LabelledSet:
    """Feature matrices, labels and groups per kind (unlabelled candidates already left out)."""

    x: dict[str, np.ndarray]
    y: dict[str, np.ndarray]
    groups: dict[str, np.ndarray]
    w: dict[str, np.ndarray] | None = None
    """Each candidate's weight in the fit (:func:`~neurorefiner.adaptation.judge.gold_labels.join_values`: a join
    weighs the traced length at stake); None or missing: one each."""

    def __post_init__(self) -> None:
        if self.w is None:
            self.w = {k: np.ones(len(self.y[k])) for k in KINDS}

    @classmethod
    def empty(cls) -> LabelledSet:
        return cls({k: np.zeros((0, len(feature_names(k)))) for k in KINDS}, {k: np.zeros(0, int) for k in KINDS},
                   {k: np.zeros(0, object) for k in KINDS})

    def weights(self, kind: str) -> np.ndarray:
        return self.w[kind] if self.w is not None and len(self.w[kind]) == len(self.y[kind]) \
            else np.ones(len(self.y[kind]))

    def add(self, candidates: Sequence[Candidate], labels: Sequence[int | None], group: str,
            weights: Sequence[float] | None = None) -> None:
        ws = list(weights) if weights is not None else [1.0] * len(candidates)
        for kind in KINDS:
            keep = [(c, y, w) for c, y, w in zip(candidates, labels, ws) if c.kind == kind and y is not None]
            if not keep:
                continue
            w_before = self.weights(kind)
            self.x[kind] = np.vstack([self.x[kind], feature_matrix([c for c, _, _ in keep], kind)])
            self.y[kind] = np.concatenate([self.y[kind], [y for _, y, _ in keep]]).astype(int)
            self.groups[kind] = np.concatenate([self.groups[kind], np.full(len(keep), group, dtype=object)])
            self.w[kind] = np.concatenate([w_before, [w for _, _, w in keep]]).astype(float)  # type: ignore[index]

    def subset(self, keep: dict[str, np.ndarray]) -> LabelledSet:
        """The rows of each kind where ``keep[kind]`` is true."""
        return LabelledSet({k: self.x[k][keep[k]] for k in KINDS}, {k: self.y[k][keep[k]] for k in KINDS},
                           {k: self.groups[k][keep[k]] for k in KINDS}, {k: self.weights(k)[keep[k]] for k in KINDS})

    def rows(self) -> list[dict]:
        """Flat rows (kind, group, label, weight, features...) for a CSV cache."""
        out = []
        for kind in KINDS:
            names = feature_names(kind)
            for xi, yi, gi, wi in zip(self.x[kind], self.y[kind], self.groups[kind], self.weights(kind)):
                out.append({"kind": kind, "group": gi, "label": int(yi), "weight": float(wi),
                            **dict(zip(names, map(float, xi)))})
        return out

    @classmethod
    def from_rows(cls, rows: Sequence[dict]) -> LabelledSet:
        s = cls.empty()
        for kind in KINDS:
            rs = [r for r in rows if r["kind"] == kind]
            if rs:
                names = feature_names(kind)
                s.x[kind] = np.array([[float(r[n]) for n in names] for r in rs])
                s.y[kind] = np.array([int(r["label"]) for r in rs])
                s.groups[kind] = np.array([str(r["group"]) for r in rs], dtype=object)
                s.w[kind] = np.array([float(r.get("weight", 1.0)) for r in rs])  # type: ignore[index]
        return s


def label_case(image: np.ndarray, mask: np.ndarray, gold, spacing: Sequence[float],  # type: ignore[no-untyped-def]
               candidate_settings: CandidateSettings | None = None, label_settings: LabelSettings | None = None,
               root: Sequence[float] | None = None) -> tuple[list[Candidate], list[int | None]]:
    """Candidates of ``mask`` and their gold labels; ``gold`` is a tree or an already built :class:`GoldIndex`
    (one per stack: its dense resampling and KD-tree serve every mask of that stack). ``root`` (ZYX voxels) makes
    the piece there the tree, as the loop does when it is told the soma."""
    cands, labels, _ = valued_case(image, mask, gold, spacing, candidate_settings, label_settings, root)
    return cands, labels


def valued_case(image: np.ndarray, mask: np.ndarray, gold, spacing: Sequence[float],  # type: ignore[no-untyped-def]
                candidate_settings: CandidateSettings | None = None, label_settings: LabelSettings | None = None,
                root: Sequence[float] | None = None) -> tuple[list[Candidate], list[int | None], list[float]]:
    """:func:`label_case` with each candidate's weight in the fit (joins valued by what they attach when the
    labels' ``join_value`` is on, :func:`~neurorefiner.adaptation.judge.gold_labels.join_values`)."""
    cands = find_candidates(image, mask, spacing, candidate_settings, root=root)
    index = gold if isinstance(gold, GoldIndex) else GoldIndex(gold, spacing, mask.shape, label_settings)
    labels = attached_piece_labels(cands.candidates, label_all(cands.candidates, index), cands.labels, cands.main,
                                   index)
    if not index.s.join_value:
        return cands.candidates, labels, [1.0] * len(labels)
    labels, weights = join_values(cands.candidates, labels, cands.labels, cands.main, index, spacing)
    return cands.candidates, labels, weights


MODELS = {"join": "logistic", "remove": "logistic", "prune": "logistic"}
"""The model type per kind: the winner leave-one-stack-out on DIADEM dev (``neurorefiner study ceilings``)."""


def fit_judge(data: LabelledSet, models: dict[str, str] | None = None, meta: dict | None = None,
              min_support: int = 1) -> Judge:
    """A judge on all of ``data``; each kind's threshold from leave-one-group-out predictions within it
    (``min_support``: see :func:`~neurorefiner.adaptation.judge.model_fit.best_threshold`)."""
    models = {**MODELS, **(models or {})}
    boosters, thresholds, prior, choices = {}, {}, {}, {}
    for kind in KINDS:
        x, y, g, w = data.x[kind], data.y[kind], data.groups[kind], data.weights(kind)
        prior[kind] = float(y.mean()) if len(y) else 0.0
        booster = fit_model(x, y, models[kind], weight=w) if len(y) else None
        if booster is None:
            choice = ThresholdChoice(1.1, "never: one class only, nothing learned")
        else:
            boosters[kind] = booster
            oof = out_of_fold(x, y, g, models[kind], w)
            choice = (choose_threshold(oof, y, MIN_PRECISION[kind], min_support) if oof is not None else
                      ThresholdChoice(1.1, "never: fewer than two stacks, no out-of-fold threshold"))
        thresholds[kind], choices[kind] = choice.threshold, choice.as_dict()
    return Judge(boosters, thresholds, prior, {**dict(meta or {}), "threshold_choice": choices})


def out_of_fold(x: np.ndarray, y: np.ndarray, groups: np.ndarray, model: str,
                weight: np.ndarray | None = None) -> np.ndarray | None:
    """Leave-one-group-out probabilities (None with fewer than two groups)."""
    uniq = sorted(set(groups.tolist()))
    if len(uniq) < 2:
        return None
    p = np.full(len(y), float(y.mean()))
    for g in uniq:
        test = groups == g
        booster = fit_model(x[~test], y[~test], model, weight=None if weight is None else weight[~test])
        if booster is not None:
            p[test] = booster.predict(x[test])
        else:
            p[test] = float(y[~test].mean()) if (~test).any() else 0.5
    return p


def held_out_judges(data: LabelledSet, models: dict[str, str] | None = None,
                    min_support: int = 1) -> dict[str, Judge]:
    """One judge per group, trained (thresholds included) without that group: every dev figure uses these."""
    groups = sorted({g for k in KINDS for g in data.groups[k].tolist()})
    out = {}
    for g in groups:
        sub = data.subset({k: data.groups[k] != g for k in KINDS})
        out[g] = fit_judge(sub, models, meta={"held_out": g}, min_support=min_support)
    return out


def held_out_scores(data: LabelledSet, judges: dict[str, Judge]) -> dict[str, dict[str, float]]:
    """Precision and recall per kind of the held-out judges on their held-out groups (pooled)."""
    out = {}
    for kind in KINDS:
        y, g, x = data.y[kind], data.groups[kind], data.x[kind]
        if not len(y):
            continue
        pred = np.zeros(len(y), bool)
        for grp, judge in judges.items():
            sel = g == grp
            if not sel.any():
                continue
            b = judge.boosters.get(kind)
            p = b.predict(x[sel]) if b is not None else np.full(sel.sum(), judge.prior.get(kind, 0.0))
            pred[sel] = p >= judge.thresholds.get(kind, 1.1)
        tp = int((pred & (y == 1)).sum())
        out[kind] = {"n": int(len(y)), "true": int(y.sum()), "flagged": int(pred.sum()),
                     "precision": tp / max(int(pred.sum()), 1), "recall": tp / max(int(y.sum()), 1)}
    return out


def gold_cases(dataset: str, split: str, segmenters: Sequence[str], limit: int | None = None) -> list[GoldCase]:
    """Every case of a registry dataset's split under each segmenter, masks from the initial-mask cache
    (made on first use, as ``evaluate.py`` does)."""
    from neurorefiner.data.registry import get_dataset
    from neurorefiner.inference.init_masks import write_init_masks
    from neurorefiner.io.stacks import read_mask

    cases = get_dataset(dataset).cases(split)[: limit or None]
    out = []
    for seg in segmenters:
        paths = {p.stem: p for p in write_init_masks(dataset, seg, None, split, None, False,
                                                     only=[c.name for c in cases], progress=False)}
        for c in cases:
            img = c.image()
            spacing = tuple(float(v) for v in (c.spacing or img.spacing))
            out.append(GoldCase(c.name, seg, img.normalized(), read_mask(paths[c.name]).load() > 0, c.gold(),
                                spacing))  # type: ignore[arg-type]
    return out


def labelled_set(cases: Sequence[GoldCase], candidate_settings: CandidateSettings | None = None,
                 label_settings: LabelSettings | None = None, progress: bool = True, augment: int = 2,
                 tree_root: str = "largest") -> tuple[LabelledSet, list[tuple[list[Candidate], list[int | None]]]]:
    """The training set of ``cases`` (with ``augment`` defect-cut copies of each mask) and, per case, the
    candidates of its own mask with their gold labels; ``tree_root`` as in :data:`TREE_ROOTS`."""
    from tqdm import tqdm

    data, per_case = LabelledSet.empty(), []
    for gc in tqdm(cases, desc="candidates", unit="case", disable=not progress):
        index = GoldIndex(gc.gold, gc.spacing, gc.mask.shape, label_settings)
        root = gc.root(tree_root)
        cands, labels, weights = valued_case(gc.image, gc.mask, index, gc.spacing, candidate_settings, root=root)
        data.add(cands, labels, gc.group, weights)
        per_case.append((cands, labels))
        for mask in augmented_masks(gc, augment, index):
            more, more_labels, more_weights = valued_case(gc.image, mask, index, gc.spacing, candidate_settings,
                                                          root=root)
            data.add(more, more_labels, gc.group, more_weights)
    return data, per_case


def shipped_threshold_lines(choices: dict[str, dict]) -> list[str]:
    """The card's table of the shipped thresholds: the rule that set each and what it admits of the out-of-fold
    probabilities it was set on (the figures a run acts at; a kind below its floor says so)."""
    if not choices:
        return []
    lines = ["", "At the shipped thresholds (out-of-fold probabilities of the stacks trained on, pooled):", "",
             "| Kind | threshold | admitted | precision | recall | rule |", "|---|---|---|---|---|---|"]
    for kind, c in choices.items():
        t = "never acts" if c["threshold"] > 1.0 else f"{c['threshold']:.3f}"
        lines.append(f"| {kind} | {t} | {c['admitted']} | {100 * c['precision']:.1f} | {100 * c['recall']:.1f} | "
                     f"{c['rule']} |")
    return lines + [""]


def judge_card(judge: Judge, scores: dict[str, dict[str, float]], command: str) -> str:
    """The card shipped beside a judge: what it was trained on, how it scores held out, how to rebuild it."""
    meta = judge.meta
    lines = ["# The judge of candidate edits (agent=learned)", "",
             "Scores every candidate edit (join / remove / prune) of a mask: the probability that gold agrees "
             "with it. Used by the learned Inspector (which edits to flag) and, through the flags, by the Advisor "
             "and the Validator.", "",
             f"- Rebuilt by: `{command}`",
             f"- Trained on: {meta.get('dataset')} {meta.get('split')} ({', '.join(meta.get('cases', []))}), "
             f"masks of {', '.join(meta.get('segmenters', []))}, plus {meta.get('augment')} defect-cut copies of "
             "each mask; labels from the gold SWC, candidates beyond the gold's scope left out.",
             f"- Models: {', '.join(f'{k}: {v}' for k, v in meta.get('models', {}).items())}; thresholds "
             f"{', '.join(f'{k}: {v:.3f}' for k, v in judge.thresholds.items())} (chosen out of fold by "
             "neurorefiner.adaptation.judge.model_fit.choose_threshold against the precision floors of MIN_PRECISION"
             + (f", thresholds admitting fewer than {meta['min_support']} candidates not held to them"
                if meta.get("min_support", 1) > 1 else "") + "; each kind's rule below).",
             f"- Labelled candidates: {', '.join(f'{k}: {int(v)}' for k, v in meta.get('labelled', {}).items())}.",
             *shipped_threshold_lines(meta.get("threshold_choice", {})),
             f"- Code: commit {meta.get('commit')}.", "",
             "Held out, each stack by a judge trained without it at that judge's own threshold (leave one stack "
             "out, both segmenters' masks of a stack together):", "",
             "| Kind | labelled | true | flagged | precision | recall |", "|---|---|---|---|---|---|"]
    for kind, s in scores.items():
        lines.append(f"| {kind} | {s['n']} | {s['true']} | {s['flagged']} | {100 * s['precision']:.1f} | "
                     f"{100 * s['recall']:.1f} |")
    lines += ["", "These are the judge's own figures. The learned Inspector also gates every join (image signal in "
              "the gap, an uncrowded place: neurorefiner.agents.learned.roles.join_gate), and the Validator checks "
              "each edit; their effect is in experiments/ceilings/.", "",
              "Stored as JSON (model coefficients or LightGBM's text model); loading runs no code."]
    return "\n".join(lines) + "\n"


def train_judge(dataset: str, split: str, segmenters: Sequence[str], out: str, augment: int = 2,
                progress: bool = True, min_support: int = 1, join_piece: float | None = None,
                tree_root: str = "largest", reach_um: float | None = None) -> tuple[Path, Path]:
    """Train the judge on a dataset's dev/train/val split (or several, comma-separated) and write it (``out``,
    JSON) with its card (``.md``); ``tree_root`` as in :data:`TREE_ROOTS`; ``reach_um``: the longest join looked
    for (default :class:`CandidateSettings`'), to match a run's ``agent.inspector.reach_um``."""
    from neurorefiner.errors import InputError
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.paths import git_commit

    splits = [s.strip() for s in split.split(",") if s.strip()]
    if "test" in splits:
        raise InputError(f"never train the judge on a test split (--split {split})")
    if dataset == "diadem" and splits != ["dev"]:
        raise InputError("the judge trains on DIADEM dev only (OP_7-OP_9 are held out)")
    if tree_root not in TREE_ROOTS:
        raise InputError(f"--tree-root {tree_root}: expected one of {', '.join(TREE_ROOTS)}")
    commit = git_commit()   # the code it starts from: a file another job writes meanwhile is not this one's change
    # several splits (train,val) where one holds too few stacks for a leave-one-stack-out threshold
    cases = [c for s in splits for c in gold_cases(dataset, s, segmenters)]
    settings = CandidateSettings() if reach_um is None else CandidateSettings(reach_um=float(reach_um))
    data, _ = labelled_set(cases, settings, LabelSettings(join_piece=join_piece), progress=progress,
                           augment=augment, tree_root=tree_root)
    scores = held_out_scores(data, held_out_judges(data, min_support=min_support))
    meta = {"dataset": dataset, "split": split, "segmenters": list(segmenters), "augment": augment,
            "min_support": min_support, "join_piece": join_piece, "tree_root": tree_root,
            "reach_um": settings.reach_um,
            "cases": sorted({c.case for c in cases}), "models": dict(MODELS), "commit": commit,
            "labelled": {k: len(v) for k, v in data.y.items()}, "held_out": scores}
    judge = fit_judge(data, meta=meta, min_support=min_support)
    for kind, c in judge.meta["threshold_choice"].items():
        if not c["rule"].startswith("precision floor"):  # the card says it too; a run should not miss it
            logging.getLogger(__name__).warning("judge %s: %s threshold %s (%s)", out, kind,
                                                "never acts" if c["threshold"] > 1 else f"{c['threshold']:.3f}",
                                                c["rule"])
    path = judge.save(Path(out))
    command = (f"neurorefiner train-judge --dataset {dataset} --split {split} --segmenters {','.join(segmenters)} "
               f"--out {out}" + (f" --min-support {min_support}" if min_support != 1 else "")
               + (f" --join-piece {join_piece:g}" if join_piece is not None else "")
               + (f" --tree-root {tree_root}" if tree_root != "largest" else "")
               + (f" --reach-um {reach_um:g}" if reach_um is not None else ""))
    card = write_text_atomic(path.with_suffix(".md"), judge_card(judge, scores, command))
    return path, card

