"""A naive threshold mask refined: does NeuroRefiner ever leave an Otsu mask worse, and what does the check of
the piece a join brings into the tree (:mod:`neurorefiner.agents.learned.attached_piece`) do.

Two tables on a dev split (DIADEM OP_1-OP_6; a test split is refused, nothing here may be chosen there):

* **per stack**: the Otsu mask (``segmenter=otsu``, the naive floor's threshold) and the learned agents' loop with
  the shipped editor on it, the piece check off and on, each with two judges: the shipped one (trained on these
  very stacks, so in sample) and one held out on the stack (the shipped recipe on the other stacks' masks of the
  learned segmenters). Root-seeded APP2, scored as the tables are.
* **joins to large pieces**: every join that a held-out judge and the gap gate would make over ``rounds`` rounds of
  a perfect editor (the joins made directly, as the ceilings make them) on each segmenter's masks, whose far piece
  has at least ``list_min`` voxels: the piece's size, its median signal over the tree's, the share of it on the
  gold (within the labels' tolerance), the check's verdict, and what the join does to root-seeded F1 and
  precision (that round's joins with it against without it). These rows choose the check's settings.

Command: ``neurorefiner study otsu-masks`` (``experiments/otsu_masks/run.sh``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ("PRE", "REC", "F1")
LOOPS = (("shipped", "off"), ("shipped", "on"), ("held_out", "off"), ("held_out", "on"))
OFF = {"join_piece_min_signal": 0.0}


def held_out_judges_of(dataset: str, split: str, segmenters: Sequence[str], progress: bool = True) -> dict:
    """One judge per stack, trained without it on the other stacks' masks of ``segmenters`` (the shipped judge's
    recipe: two defect-cut copies of each mask, :func:`neurorefiner.adaptation.judge.training.labelled_set`)."""
    from neurorefiner.adaptation.judge.training import gold_cases, held_out_judges, labelled_set

    data, _ = labelled_set(gold_cases(dataset, split, segmenters), progress=progress)
    return held_out_judges(data)


def refine(gc: Any, judge: Any, inspector: dict | None = None, t_max: int = 5) -> tuple[np.ndarray, dict, int]:
    """The learned agents' loop (conf/agent/learned.yaml with ``judge`` and ``inspector`` overrides) and the shipped
    editor on one case, built as ``refine.py`` builds it, told the soma (the gold's root, as the tables' runs are:
    evaluate.py ``tree_root=gold``); returns the refined mask, the loop's edit counts and the
    number of joins the piece check turned down (read from the run's trace)."""
    from omegaconf import OmegaConf

    from neurorefiner.agents.trace import read_trace
    from neurorefiner.paths import conf_dir
    from neurorefiner.refine.run import RefineRun

    run = RefineRun.build(OmegaConf.load(conf_dir() / "agent" / "learned.yaml"), None,
                          OmegaConf.load(conf_dir() / "editor" / "toporefinenet.yaml"), t_max,
                          role_kwargs={"inspector": {"judge": judge, **(inspector or {})}})
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        result = run.with_spacing(gc.spacing, "the dataset's voxel size").run(gc.image, gc.mask, trace_path=trace,
                                                                              root=gc.root("gold"))
        refused = sum(len((r.get("raw") or {}).get("joins_refused_for_their_piece", []))
                      for r in read_trace(trace) if r.get("role") == "inspector")
    return result.mask, dict(result.counts), refused


def stack_rows(cases: Sequence[Any], judges: dict, shipped: Any, progress: bool = True) -> list[dict]:
    """Per case: the initial mask, then one row per (judge, check) of :data:`LOOPS`."""
    from tqdm import tqdm

    from neurorefiner.studies.ceilings import protocol_scorer

    score = protocol_scorer()
    rows = []
    for gc in tqdm(cases, desc="otsu masks", unit="case", disable=not progress):
        first = score(gc.mask, gc.gold, gc.spacing)
        rows.append(_stack_row(gc, "initial", "-", "-", first, first))
        for which, check in LOOPS:
            judge = shipped if which == "shipped" else judges[gc.group]
            mask, counts, refused = refine(gc, judge, OFF if check == "off" else None)
            row = _stack_row(gc, "neurorefiner", which, check, score(mask, gc.gold, gc.spacing), first)
            row.update(accepted=counts.get("accepted", ""), refused_for_piece=refused)
            rows.append(row)
    return rows


def _stack_row(gc: Any, method: str, judge: str, check: str, m: dict, first: dict) -> dict:
    out = {"case": gc.case, "segmenter": gc.segmenter, "method": method, "judge": judge, "piece_check": check}
    out.update({k: round(100 * m[k], 2) for k in METRICS})
    out["dF1"] = round(100 * (m["F1"] - first["F1"]), 2)
    return out


def large_join_rows(cases: Sequence[Any], judges: dict, list_min: int = 300, rounds: int = 5,
                    progress: bool = True) -> list[dict]:
    """The joins to pieces of at least ``list_min`` voxels a held-out judge and the gap gate make over ``rounds``
    rounds of a perfect editor on each case (module docstring), the tree being the piece at the gold's root as in
    the loop; each with the check's verdict at its defaults."""
    from tqdm import tqdm

    from neurorefiner.adaptation.judge.gold_labels import GoldIndex
    from neurorefiner.agents.candidates import apply_candidates, find_candidates
    from neurorefiner.agents.learned.attached_piece import PieceCheck
    from neurorefiner.agents.learned.roles import choose, join_gate
    from neurorefiner.studies.ceilings import protocol_scorer

    score, check, rows = protocol_scorer(), PieceCheck(), []
    for gc in tqdm(cases, desc="joins to large pieces", unit="case", disable=not progress):
        index, mask = GoldIndex(gc.gold, gc.spacing, gc.mask.shape), gc.mask
        for rnd in range(rounds):
            found = find_candidates(gc.image, mask, gc.spacing, kinds=("join", "remove"), root=gc.root("gold"))
            p, passed = judges[gc.group].decide(found.candidates)
            noise = {c.pieces[0]: float(q) for c, q in zip(found.candidates, p) if c.kind == "remove"}
            picked = [c for c, _ in choose(found.candidates, p, passed, False, lambda c: join_gate(c, piece=None))
                      if c.kind == "join"]
            if not picked:
                break
            for c in picked:
                if np.expm1(c.features["log_size_small"]) >= list_min:
                    row = _join_row(gc, rnd, c, found, index, check, picked, mask, score)
                    rows.append({**row, "noise_p": round(noise.get(c.pieces[0], float("nan")), 4)})
            mask = apply_candidates(mask, picked)
    return rows


def _join_row(gc: Any, rnd: int, c: Any, found: Any, index: Any, check: Any, picked: list, mask: np.ndarray,
              score: Any) -> dict:
    """One join to a large piece: what the piece is and what the join does (that round's joins with / without)."""
    from neurorefiner.agents.candidates import apply_candidates

    vox = np.argwhere(found.labels == c.pieces[0])
    sample = vox[np.random.default_rng(0).choice(len(vox), min(len(vox), 4000), replace=False)]
    with_it = score(apply_candidates(mask, picked), gc.gold, gc.spacing)
    without = score(apply_candidates(mask, [o for o in picked if o is not c]), gc.gold, gc.spacing)
    return {"segmenter": gc.segmenter, "case": gc.case, "round": rnd, "piece_voxels": len(vox),
            "tree_voxels": int(found.sizes[found.main]), "gap_um": round(c.features["gap_um"], 2),
            "signal_ratio": round(check.ratio(c), 3), "on_gold": round(float(index.near(sample).mean()), 3),
            "in_scope": round(float(index.in_scope(sample).mean()), 3),
            "check": "refuses" if not check.passes(c) else ("passes" if check.applies(c) else "not asked"),
            "dF1": round(100 * (with_it["F1"] - without["F1"]), 2),
            "dPRE": round(100 * (with_it["PRE"] - without["PRE"]), 2)}


def stack_table(rows: Sequence[dict]) -> str:
    """Markdown: per case, the initial mask and each loop's PRE / REC / F1 and its F1 change."""
    cols = [("initial", "-", "-")] + [("neurorefiner", j, c) for j, c in LOOPS]
    head = ["initial"] + [f"{j} judge, check {c}" for j, c in LOOPS]
    lines = ["| Stack | " + " | ".join(head) + " |", "|---|" + "---|" * len(head)]
    by = {(r["case"], r["method"], r["judge"], r["piece_check"]): r for r in rows}
    for case in sorted({r["case"] for r in rows}):
        cells = []
        for key in cols:
            r = by.get((case, *key))
            cells.append("" if r is None else f"{r['F1']:.2f} ({r['PRE']:.2f} / {r['REC']:.2f})"
                         + ("" if key[0] == "initial" else f" {r['dF1']:+.2f}"))
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    means = []
    for key in cols:
        rs = [r for r in rows if (r["method"], r["judge"], r["piece_check"]) == key]
        means.append(f"{np.mean([r['F1'] for r in rs]):.2f}" if rs else "")
    lines.append("| mean F1 | " + " | ".join(means) + " |")
    return "\n".join(lines) + "\n"


def joins_table(rows: Sequence[dict]) -> str:
    """Markdown: the joins to large pieces, one line each."""
    keys = ("segmenter", "case", "round", "piece_voxels", "tree_voxels", "gap_um", "signal_ratio", "noise_p",
            "on_gold", "in_scope", "check", "dF1", "dPRE")
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        lines.append("| " + " | ".join(str(r[k]) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def otsu_masks(dataset: str, split: str, out: Path, judge_segmenters: Sequence[str],
               join_segmenters: Sequence[str], list_min: int = 300, limit: int | None = None,
               progress: bool = True) -> Path:
    """Both tables (module docstring): ``<out>/otsu_masks.md``, ``per_stack.csv`` and ``joins_to_large_pieces.csv``."""
    from neurorefiner.adaptation.judge.training import gold_cases
    from neurorefiner.agents.learned.judge import Judge
    from neurorefiner.agents.learned.roles import shipped_judge
    from neurorefiner.errors import InputError
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv

    if "test" in split.split(","):
        raise InputError(f"this study chooses settings: dev / val splits only (--split {split})")
    stamp = provenance(f"neurorefiner study otsu-masks --dataset {dataset} --split {split} --judge-segmenters "
                       f"{','.join(judge_segmenters)} --segmenters {','.join(join_segmenters)} --list-min {list_min}"
                       f" --out {out}" + (f" --limit {limit}" if limit else ""))
    judges = held_out_judges_of(dataset, split, judge_segmenters, progress)
    otsu = gold_cases(dataset, split, ["otsu"], limit)
    per_stack = stack_rows(otsu, judges, Judge.load(shipped_judge()), progress)
    joins = large_join_rows(gold_cases(dataset, split, list(join_segmenters), limit), judges, list_min,
                            progress=progress)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / "per_stack.csv", per_stack)
    write_rows_csv(out / "joins_to_large_pieces.csv", joins)
    return write_markdown(out / "otsu_masks.md", _report(dataset, split, stamp, per_stack, joins, list_min))


def _report(dataset: str, split: str, stamp: dict, per_stack: list[dict], joins: list[dict], list_min: int) -> str:
    from neurorefiner.agents.learned.attached_piece import PieceCheck

    check = PieceCheck()
    worst = {key: min((r["dF1"] for r in per_stack if (r["judge"], r["piece_check"]) == key), default=0.0)
             for key in LOOPS}
    return (f"# Otsu masks refined: {dataset} {split}\n\nProduced by `{stamp['command']}` on {stamp['date']} at "
            f"commit `{stamp['commit']}`.\n\n## Per stack\n\nRoot-seeded APP2; each cell F1 (PRE / REC) in %, and "
            "for the loops the change in F1 from the Otsu mask. `shipped judge`: checkpoints/judge.json, trained "
            "on these stacks (in sample); `held_out judge`: the same recipe without the stack. `check`: the "
            f"piece check of a join (off, or at conf/agent/learned.yaml's {check.min_size} voxels and "
            f"{check.min_signal} of the tree's signal).\n\n" + stack_table(per_stack)
            + "\nLargest F1 loss of any stack: " + ", ".join(f"{j} judge, check {c}: {worst[(j, c)]:+.2f}"
                                                           for j, c in LOOPS) + ".\n"
            + f"\n## Joins to large pieces\n\nEvery join of at least {list_min} voxels' far piece that a held-out "
              "judge and the gap gate make over five rounds of a perfect editor (joins made directly), on each "
              "segmenter's masks. `signal_ratio`: the far piece's median signal over the tree's; `noise_p`: the "
              "judge's probability that the piece, as an isolated piece, is noise (its remove kind); `on_gold`: "
              "share of its voxels within the gold's tolerance; `dF1`/`dPRE`: root-seeded, that round's joins "
              "with the join against without it (0 where the root's tree is elsewhere).\n\n" + joins_table(joins)
            + "\n" + _check_summary(joins) + "\n")


def _check_summary(joins: Sequence[dict]) -> str:
    """One sentence: what the check does to the listed joins, read against the gold."""
    def count(verdict: str, on_gold: bool) -> int:
        return sum(r["check"] == verdict and (r["on_gold"] >= 0.5) == on_gold for r in joins)

    return (f"Of these joins the check refuses {count('refuses', False)} onto pieces mostly off the gold and "
            f"{count('refuses', True)} onto pieces mostly on it; it passes {count('passes', True)} checked joins "
            f"onto pieces mostly on the gold and {count('passes', False)} mostly off it (on_gold >= 0.5: mostly "
            "on); the rest are below its size.")
