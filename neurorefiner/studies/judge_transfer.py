"""Which judge transfers: every model type scored leave one dataset out on the mined candidates
(:mod:`neurorefiner.adaptation.judge.mining`).

For each held-out dataset (diadem, cwmbs_weak, cwmbs_noise, bigneuron, zbfwb: a synthetic preset and its
real namesake are one dataset) a judge of each model type trains on every other dataset's candidates and is
scored on the held-out one's. Its threshold is chosen without the held-out dataset
(:mod:`neurorefiner.adaptation.judge.model_fit`: the precision floor held on each training dataset's predictions
from a model that did not see it). Reported
per held-out dataset and kind: precision and recall at that threshold, average precision, and the recall the
best threshold would reach at the precision floor (the ranking's worth apart from its calibration).

Where the ranking transfers but the threshold does not, a lab can label a few candidates of its own data. The
``calibrate`` rows measure that: the same held-out judge, its threshold chosen on ``k`` labelled candidates drawn
at random from the held-out dataset (the floor, plus a margin, held on them: :func:`calibrated_threshold`),
scored on the rest; ``repeats`` draws averaged. ``met`` is the share of draws where the remaining candidates
reach the target (precision >= the floor at recall >= 60 %).

Model types: ``logistic`` (the shipped JSON judge's: hand features), ``lgbm`` (trees, hand features),
``crop_lgbm`` (trees, hand features + crop statistics: :mod:`~neurorefiner.agents.learned.crop_features`) and
``crop_net`` (a small 3D network over the crop with the hand features beside it:
:mod:`~neurorefiner.agents.learned.crop_net`). Command: ``neurorefiner study judge-transfer``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.adaptation.judge.calibration import calibrated_threshold
from neurorefiner.adaptation.judge.mining import CandidateTable
from neurorefiner.adaptation.judge.model_fit import MIN_PRECISION, MODELS, best_threshold, inner_threshold, predict
from neurorefiner.agents.candidates import feature_names

FAMILIES = ("diadem", "cwmbs_weak", "cwmbs_noise", "bigneuron", "zbfwb")
TARGET_RECALL = 0.6


def scores(p: np.ndarray, y: np.ndarray, threshold: float, floor: float) -> dict[str, float]:
    """Precision/recall at ``threshold``, average precision, and the best recall at precision >= ``floor``."""
    from sklearn.metrics import average_precision_score

    pred = p >= threshold
    tp = int((pred & (y == 1)).sum())
    out = {"n": int(len(y)), "true": int(y.sum()), "flagged": int(pred.sum()), "threshold": float(threshold),
           "precision": tp / max(int(pred.sum()), 1), "recall": tp / max(int(y.sum()), 1),
           "ap": float(average_precision_score(y, p)) if 0 < y.sum() < len(y) else float("nan")}
    best = best_threshold(p, y, floor, min_support=10)
    bp = p >= best
    out["recall_at_floor"] = int((bp & (y == 1)).sum()) / max(int(y.sum()), 1)
    return out


def calibration_rows(p: np.ndarray, y: np.ndarray, floor: float, ks: Sequence[int], repeats: int,
                     seed: int = 0) -> list[dict]:
    """Per ``k``: the held-out judge's scores ``p`` with the threshold set on ``k`` random labelled candidates,
    scored on the others, averaged over ``repeats`` draws (module docstring). ``k`` leaving fewer than 10
    candidates to score is skipped."""
    rng = np.random.default_rng(seed)
    out = []
    for k in ks:
        if len(y) - k < 10:
            continue
        draws = []
        for _ in range(repeats):
            pick = rng.permutation(len(y))
            cal, rest = pick[:k], pick[k:]
            s = scores(p[rest], y[rest], calibrated_threshold(p[cal], y[cal], floor), floor)
            s["met"] = float(s["precision"] >= floor and s["recall"] >= TARGET_RECALL)
            draws.append(s)
        row = {key: float(np.nanmean([d[key] for d in draws])) for key in draws[0]}
        row.update(n=int(len(y) - k), true=int(round(row["true"])), flagged=int(round(row["flagged"])))
        out.append({"labelled": int(k), **row})
    return out


def leave_one_dataset_out(table: CandidateTable, models: Sequence[str] = MODELS,
                          families: Sequence[str] | None = None, epochs: int = 12,
                          progress: bool = True, calibrate: Sequence[int] = (), repeats: int = 50) -> list[dict]:
    """One row per (model, held-out dataset, subset): subset ``all`` (every mined mask of the held-out dataset)
    and ``segmenter`` (its segmenters' own masks only, no defect-cut copies, no gold-derived masks); with
    ``calibrate``, one more row per ``k`` (model ``<model> + k labelled``, subset ``all``)."""
    from tqdm import tqdm

    floor = MIN_PRECISION[table.kind]
    fams = table.families
    present = [f for f in (families or FAMILIES) if (fams == f).any()]
    rows = []
    work = [(m, f) for m in models for f in present]
    for model, held in tqdm(work, desc=f"leave one dataset out ({table.kind})", disable=not progress):
        test = fams == held
        train = table.subset(~test)
        m, thr, _, _ = inner_threshold(model, train, floor, epochs=epochs)
        p = predict(m, table.subset(test))
        y = table.y[test]
        seg = (table.variant[test] == 0) & (table.source[test] != "gold")
        for subset, sel in (("all", np.ones(len(y), bool)), ("segmenter", seg)):
            if not sel.any():
                continue
            rows.append({"kind": table.kind, "model": model, "held_out": held, "subset": subset,
                         "train": int(len(train)), **scores(p[sel], y[sel], thr, floor), "met": float("nan")})
        for c in calibration_rows(p, y, floor, calibrate, repeats):
            k = c.pop("labelled")
            rows.append({"kind": table.kind, "model": f"{model} + {k} labelled", "held_out": held, "subset": "all",
                         "train": int(len(train)), **c})
    return rows


def shipped_rows(table: CandidateTable, judge_path: Path, trained_on: str = "diadem") -> list[dict]:
    """The shipped JSON judge as it is (trained on DIADEM dev) on every other dataset's candidates."""
    from neurorefiner.agents.learned.judge import Judge

    judge = Judge.load(judge_path)
    floor = MIN_PRECISION[table.kind]
    model = judge.boosters.get(table.kind)
    thr = judge.thresholds.get(table.kind, 1.1)
    names = feature_names(table.kind)   # the table's columns; the judge reads its own, in its order
    cols = [names.index(n) for n in judge.names(table.kind)]
    fams = table.families
    rows = []
    for held in FAMILIES:
        test = fams == held
        if held == trained_on or not test.any():
            continue
        t = table.subset(test)
        p = model.predict(t.x[:, cols]) if model is not None else np.full(len(t), judge.prior.get(table.kind, 0.0))
        seg = (t.variant == 0) & (t.source != "gold")
        for subset, sel in (("all", np.ones(len(t), bool)), ("segmenter", seg)):
            if sel.any():
                rows.append({"kind": table.kind, "model": f"shipped {judge_path.name}", "held_out": held,
                             "subset": subset, "train": 0, **scores(p[sel], t.y[sel], thr, floor),
                             "met": float("nan")})
    return rows


def _met(row: dict) -> str:
    met = row.get("met", float("nan"))
    return "-" if met != met else f"{100 * met:.0f} %"


def markdown(rows: list[dict], command: str, when: str, commit: str, counts: dict) -> str:
    lines = ["# The judge, leave one dataset out (SYNTHETIC stand-ins and real DIADEM dev)", "",
             f"Produced by `{command}` on {when} at commit `{commit}`.", "",
             "Candidates mined by `neurorefiner make judge-candidates` (data/cache/judge_candidates/): per dataset and "
             "kind, labelled candidates (true):", ""]
    lines += [f"- {k}: " + ", ".join(f"{f} {n} ({t})" for f, (n, t) in v.items()) for k, v in counts.items()]
    lines += ["", "Each row: a judge trained on every other dataset, its threshold chosen without the held-out one "
              "(neurorefiner.studies.judge_transfer). `all`: every mined mask of the held-out dataset (its "
              "segmenters' masks, their defect-cut copies, gold-derived masks with defects cut in); `segmenter`: its "
              "segmenters' own masks only. P/R at the chosen threshold, AP = average precision, R@floor = recall "
              "the best threshold reaches at the kind's precision floor (join 80 %, remove/prune 90 %). "
              "`<model> + k labelled`: the threshold set on k labelled candidates of the held-out dataset drawn at "
              "random, scored on the rest, averaged over draws; `met`: share of draws reaching P >= floor at "
              "R >= 60 %.", "",
              "| kind | model | held out | subset | n | true | flagged | P | R | AP | R@floor | met |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['model']} | {r['held_out']} | {r['subset']} | {r['n']} | {r['true']} | "
                     f"{r['flagged']} | {100 * r['precision']:.1f} | {100 * r['recall']:.1f} | {100 * r['ap']:.1f} | "
                     f"{100 * r['recall_at_floor']:.1f} | {_met(r)} |")
    lines += ["", "Mean over held-out datasets (subset `all`; `met` for the labelled rows):", "",
              "| kind | model | P | R | AP | R@floor | met |", "|---|---|---|---|---|---|---|"]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        for model in dict.fromkeys(r["model"] for r in rows):
            rs = [r for r in rows if r["kind"] == kind and r["model"] == model and r["subset"] == "all"]
            if rs:
                met = [r.get("met", float("nan")) for r in rs]
                lines.append(f"| {kind} | {model} | " + " | ".join(
                    f"{100 * np.nanmean([r[k] for r in rs]):.1f}"
                    for k in ("precision", "recall", "ap", "recall_at_floor"))
                    + (f" | {100 * np.nanmean(met):.0f} % |" if not np.isnan(met).all() else " | - |"))
    return "\n".join(lines) + "\n"


def judge_transfer(root: Path, out: Path, kinds: Sequence[str], models: Sequence[str], epochs: int = 12,
                   progress: bool = True, command: str = "", shipped: Path | None = None,
                   calibrate: Sequence[int] = (), repeats: int = 50) -> Path:
    from neurorefiner.adaptation.judge.mining import load_table
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv

    stamp = provenance(command)   # before this run writes its own tracked outputs (else every table reads +dirty)
    rows, counts = [], {}
    for kind in kinds:
        t = load_table(root, kind)
        fams = t.families
        counts[kind] = {f: (int((fams == f).sum()), int(t.y[fams == f].sum())) for f in FAMILIES if (fams == f).any()}
        if shipped is not None:
            rows += shipped_rows(t, Path(shipped))
        rows += leave_one_dataset_out(t, models, epochs=epochs, progress=progress, calibrate=calibrate,
                                      repeats=repeats)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / "judge_transfer.csv", rows)
    return write_markdown(out / "judge_transfer.md", markdown(rows, command, stamp["date"], stamp["commit"], counts))
