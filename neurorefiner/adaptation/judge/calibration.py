"""A shipped judge's thresholds set on a lab's own traced stacks.

Why: left out of its training, the judge's *ranking* of candidate joins carries over to a new kind of data, its
*threshold* does not (``experiments/judge/README.md``: leave one dataset out, mean join precision / recall 90.1 /
55.8 with the training thresholds, 87.5 / 75.1 with the threshold set on 20 labelled candidates of the new
dataset). A lab has a few stacks traced by hand; their gold SWCs label every candidate the Inspector finds on
the lab's own masks, and the threshold per kind becomes the lowest at which the labelled candidates it admits are
right at the kind's precision floor plus a fixed margin (:func:`calibrated_threshold`). The models are kept as
they are: too few labels to retrain, enough to place a threshold.

Kinds with too few labelled candidates, or with one class only, keep the judge's own threshold, and the report
says so. Precision and recall in the report are measured on the same labelled candidates the thresholds were
set on (in-sample): a check that the setting did what it should, not a held-out score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex, label_all
from neurorefiner.adaptation.judge.model_fit import MIN_PRECISION, best_threshold
from neurorefiner.agents.candidates import KINDS, CandidateSettings, find_candidates
from neurorefiner.agents.learned.judge import CropView, Judge

CALIBRATION_MARGIN = 0.1
"""Added to the precision floor on the few labels (set a priori, never from held-out scores): a threshold set
exactly at the floor on 20 labels falls under it on the rest about half the time."""

MIN_LABELLED = 10
"""Labelled candidates of a kind (with both right and wrong ones among them) below which its threshold is kept."""


def calibrated_threshold(p: np.ndarray, y: np.ndarray, floor: float) -> float:
    """The lowest threshold at which the labelled candidates it admits are right at ``floor +
    CALIBRATION_MARGIN``. Only the admitted set is held to it, not every threshold above (with 20 labels one wrong
    candidate on top would otherwise silence the kind); 1.1 (never act) when no threshold reaches it."""
    return best_threshold(p, y, min(floor + CALIBRATION_MARGIN, 1.0), min_support=len(y) + 1)


@dataclass(frozen=True)
class LabelledStack:
    """One stack a lab traced: the image (float ZYX in [0, 1]), its segmentation, the gold tree, the voxel size."""

    name: str
    image: np.ndarray
    mask: np.ndarray
    gold: object
    spacing: tuple[float, float, float]


@dataclass
class KindCalibration:
    """What calibration did to one kind's threshold, with the in-sample figures before and after."""

    kind: str
    labelled: int
    right: int
    before: float
    after: float
    kept: str = ""          # why the old threshold was kept ("" when it was set anew)
    precision_before: float = float("nan")
    recall_before: float = float("nan")
    precision_after: float = float("nan")
    recall_after: float = float("nan")


def _precision_recall(p: np.ndarray, y: np.ndarray, threshold: float) -> tuple[float, float]:
    admitted = p >= threshold
    tp = int((admitted & (y == 1)).sum())
    precision = tp / int(admitted.sum()) if admitted.any() else float("nan")
    return precision, tp / max(int(y.sum()), 1)


def labelled_scores(judge: Judge, stacks: Sequence[LabelledStack], settings: CandidateSettings | None = None,
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per kind, the judge's probability and the gold label of every candidate on ``stacks`` that gold labels
    (candidates beyond the gold's scope, or ambiguous, are left out as in training)."""
    pooled: dict[str, tuple[list[float], list[int]]] = {k: ([], []) for k in KINDS}
    for stack in stacks:
        found = find_candidates(stack.image, stack.mask, stack.spacing, settings)
        if not found.candidates:
            continue
        view = CropView(stack.image, stack.mask, stack.spacing, found.levels) if judge.uses_crops else None
        p = judge.probabilities(found.candidates, view)
        labels = label_all(found.candidates, GoldIndex(stack.gold, stack.spacing, stack.mask.shape))
        for c, prob, label in zip(found.candidates, p, labels, strict=True):
            if label is not None:
                pooled[c.kind][0].append(float(prob))
                pooled[c.kind][1].append(int(label))
    return {k: (np.asarray(v[0], float), np.asarray(v[1], int)) for k, v in pooled.items()}


def calibrate(judge: Judge, scores: dict[str, tuple[np.ndarray, np.ndarray]], kinds: Sequence[str] = ("join",)
              ) -> tuple[Judge, list[KindCalibration]]:
    """A copy of ``judge`` with the thresholds of ``kinds`` set on the labelled ``scores``
    (:func:`labelled_scores`), and what changed per kind. The models are shared, not copied."""
    bad = set(kinds) - set(KINDS)
    if bad:
        raise ValueError(f"unknown candidate kind(s) {sorted(bad)}; kinds are {KINDS}")
    thresholds = dict(judge.thresholds)
    report = []
    for kind in kinds:
        p, y = scores.get(kind, (np.zeros(0), np.zeros(0, int)))
        before = float(judge.thresholds.get(kind, 1.1))
        row = KindCalibration(kind, len(y), int(y.sum()), before, before)
        if kind not in judge.boosters:
            row.kept = "the judge has no model for this kind"
        elif len(y) < MIN_LABELLED:
            row.kept = f"{len(y)} labelled candidates, fewer than {MIN_LABELLED}"
        elif y.min() == y.max():
            row.kept = f"all {len(y)} labelled candidates are {'right' if y[0] else 'wrong'}"
        else:
            row.after = calibrated_threshold(p, y, MIN_PRECISION[kind])
            thresholds[kind] = row.after
        if len(y):
            row.precision_before, row.recall_before = _precision_recall(p, y, before)
            row.precision_after, row.recall_after = _precision_recall(p, y, row.after)
        report.append(row)
    meta = dict(judge.meta)
    meta["calibrated"] = {"margin": CALIBRATION_MARGIN, "min_labelled": MIN_LABELLED,
                          "kinds": {r.kind: {"labelled": r.labelled, "right": r.right, "before": r.before,
                                             "after": r.after, "kept": r.kept} for r in report}}
    return replace(judge, thresholds=thresholds, meta=meta), report


def calibration_card(report: Sequence[KindCalibration], stacks: Sequence[str], source: str, command: str) -> str:
    """The card written beside a calibrated judge."""

    def pct(v: float) -> str:
        return "-" if v != v else f"{100 * v:.1f}"

    def thr(v: float) -> str:
        return "never acts" if v > 1.0 else f"{v:.3f}"

    lines = ["# A judge calibrated on a lab's own traced stacks", "",
             f"- From: `{source}` (its models unchanged; only the thresholds below are set anew)",
             f"- Labelled on: {', '.join(stacks)} (candidates of the given masks, labels from the gold SWCs)",
             f"- Rebuilt by: `{command}`",
             f"- Rule: the lowest threshold at which the admitted labelled candidates are right at the kind's "
             f"precision floor + {CALIBRATION_MARGIN:.2f} (join floor {MIN_PRECISION['join']:.2f}); a kind with "
             f"fewer than {MIN_LABELLED} labelled candidates or one class only keeps its threshold.", "",
             "Precision / recall are on the same labelled candidates (in-sample), before and after:", "",
             "| kind | labelled | right | threshold before | after | precision before | recall before | "
             "precision after | recall after | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report:
        lines.append(f"| {r.kind} | {r.labelled} | {r.right} | {thr(r.before)} | {thr(r.after)} | "
                     f"{pct(r.precision_before)} | {pct(r.recall_before)} | {pct(r.precision_after)} | "
                     f"{pct(r.recall_after)} | {r.kept or 'set anew'} |")
    lines += ["", "Use it with `python refine.py ... agent.inspector.judge=<this file>`."]
    return "\n".join(lines) + "\n"
