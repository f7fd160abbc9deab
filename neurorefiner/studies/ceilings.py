"""Where the points are: what gold-vetted choices among the candidate edits would reach.

For each case (an image, a segmenter's initial mask, the gold SWC) every candidate edit is enumerated
(:mod:`neurorefiner.agents.candidates`), labelled from the gold (:mod:`neurorefiner.adaptation.judge.gold_labels`)
and the true ones are made directly, as a perfect editor would:

* ``ceiling_a``: the true joins and the true removals of isolated pieces;
* ``ceiling_b``: ``ceiling_a`` plus the true prunes (attached false structure inside the gold's scope);
* ``scope``: the initial mask cut to the gold's scope box, the effect of false structure beyond the gold's
  extent alone (not a refiner's job: a fibre the gold did not trace is not an error of the mask);

beside the initial mask and the classical refiner, each scored as the tables are (root-seeded APP2 against the
gold). Every later NeuroRefiner row is read against ``ceiling_a`` and ``ceiling_b``. Nothing here is tuned on
the test stacks: the command runs on dev / val splits. Command: ``neurorefiner study ceilings``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROWS = ("initial", "classical", "ceiling_a", "ceiling_b", "scope", "judge_a", "judge_b", "loop")
METRICS = ("SD", "SSD", "PRE", "REC", "F1")


def protocol_scorer() -> Callable[[np.ndarray, Any, Any], dict[str, float]]:
    """mask, gold tree, spacing -> the tables' metrics (root-seeded APP2, conf/tracing and conf/metrics)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir
    from neurorefiner.tracing.seeding import marker_nearest_root

    tracer = instantiate(OmegaConf.load(conf_dir() / "tracing" / "app2.yaml"))
    scorer = instantiate(OmegaConf.load(conf_dir() / "metrics" / "default.yaml"))

    def score(mask: np.ndarray, gold: Any, spacing: Any) -> dict[str, float]:
        pred = tracer(np.asarray(mask) > 0, spacing, marker=marker_nearest_root(mask, gold, spacing))
        return {k: float(v) for k, v in scorer(gold, pred, spacing).items()}

    return score


def classical_mask(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float], gold: Any = None) -> np.ndarray:
    """The classical refiner with the parameters the tables use (conf/method/classical.yaml), bridging to the
    piece at ``gold``'s root when that file's ``tree_root`` is ``gold`` (as the tables' classical row does)."""
    from neurorefiner.baselines.classical import classical_refine

    params = method_params("classical")
    root = committed_root(params.pop("tree_root", "largest"), gold)
    return classical_refine(image, mask, spacing, **params, root=root)


def method_params(method: str) -> dict:
    """conf/method/<method>.yaml as written (unresolved), without its ``_target_``-style keys."""
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir

    node = OmegaConf.to_container(OmegaConf.load(conf_dir() / "method" / f"{method}.yaml"))
    return {k: v for k, v in node.items() if not k.startswith("_")}  # type: ignore[union-attr]


def committed_root(tree_root: str, gold: Any) -> tuple[float, float, float] | None:
    """The soma a table row with this ``tree_root`` is told: as the evaluation's methods do it
    (:func:`neurorefiner.evaluation.methods.case_root`), from ``gold`` (None without a gold tree)."""
    from neurorefiner.evaluation.methods import check_tree_root
    from neurorefiner.tracing.seeding import gold_root_zyx

    return gold_root_zyx(gold) if check_tree_root(tree_root) == "gold" and gold is not None else None


def ceiling_masks(gc: Any, cands: Sequence[Any], labels: Sequence[int | None], judge: Any = None
                  ) -> dict[str, np.ndarray]:
    """The rows' masks for one case (a :class:`~neurorefiner.adaptation.judge.training.GoldCase`) from its
    candidates and their gold labels; ``judge``: a judge that never saw this stack adds the row of its own
    choices made directly (what the learned agents would reach with a perfect editor)."""
    from neurorefiner.adaptation.judge.gold_labels import GoldIndex
    from neurorefiner.agents.candidates import apply_candidates
    from neurorefiner.agents.learned.roles import choose, join_gate

    true = [c for c, y in zip(cands, labels) if y == 1]
    index = GoldIndex(gc.gold, gc.spacing, gc.mask.shape)
    masks = {
        "initial": gc.mask,
        "classical": classical_mask(gc.image, gc.mask, gc.spacing, gc.gold),
        "ceiling_a": apply_candidates(gc.mask, [c for c in true if c.kind in ("join", "remove")]),
        "ceiling_b": apply_candidates(gc.mask, true),
        "scope": _cut_to(gc.mask, index.scope_slices()),
    }
    if judge is not None:
        p, passed = judge.decide(cands, crop_view(gc) if judge.uses_crops else None)
        picked = choose(cands, p, passed, gate=join_gate)
        masks["judge_a"] = apply_candidates(gc.mask, [c for c, _ in picked if c.kind != "prune"])
        masks["judge_b"] = apply_candidates(gc.mask, [c for c, _ in picked])
    return masks


def crop_view(gc: Any) -> Any:
    """What a judge whose models read crops is shown: the case's image and mask, at the intensity levels the
    candidates were found with (the Inspector's own view, :class:`~neurorefiner.agents.learned.judge.CropView`)."""
    from neurorefiner.agents.learned.judge import CropView
    from neurorefiner.agents.pieces import intensity_levels

    spacing = tuple(float(v) for v in gc.spacing)
    return CropView(gc.image, gc.mask, spacing, intensity_levels(gc.image, gc.mask))  # type: ignore[arg-type]


def loop_mask(gc: Any, judge: Any, t_max: int = 5) -> tuple[np.ndarray, dict]:
    """The learned agents' loop (conf/agent/learned.yaml, with ``judge``) and the shipped editor
    (conf/editor/toporefinenet.yaml) on one case: the NeuroRefiner row at the committed settings, built as
    ``refine.py`` builds its run (:class:`~neurorefiner.refine.run.RefineRun`)."""
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir
    from neurorefiner.refine.run import RefineRun

    run = RefineRun.build(OmegaConf.load(conf_dir() / "agent" / "learned.yaml"), None,
                          OmegaConf.load(conf_dir() / "editor" / "toporefinenet.yaml"), t_max,
                          role_kwargs={"inspector": {"judge": judge}})
    root = committed_root(method_params("neurorefiner").get("tree_root", "largest"), gc.gold)
    result = run.with_spacing(gc.spacing, "the dataset's voxel size").run(gc.image, gc.mask, root=root)
    return result.mask, result.counts


def candidate_counts(cands: Sequence[Any], labels: Sequence[int | None]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c, y in zip(cands, labels):
        key = f"{c.kind}_{'none' if y is None else y}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _cut_to(mask: np.ndarray, box: tuple[slice, ...]) -> np.ndarray:
    out = np.zeros_like(mask, dtype=bool)
    out[box] = mask[box]
    return out


def run_ceilings(cases: Sequence[Any], judges: dict[str, Any] | None = None, progress: bool = True,
                 loop: bool = False) -> tuple[list[dict], Any]:
    """One row per (case, segmenter, row); and the labelled set (for the judge's held-out figures).
    ``judges``: group -> a judge trained without that group (the judge rows are skipped without)."""
    from tqdm import tqdm

    from neurorefiner.adaptation.judge.training import labelled_set

    data, per_case = labelled_set(cases, progress=progress, augment=2 if judges is None else 0)
    if judges is None:
        from neurorefiner.adaptation.judge.training import held_out_judges

        judges = held_out_judges(data)
    score = protocol_scorer()
    rows = []
    for gc, (cands, labels) in tqdm(list(zip(cases, per_case)), desc="ceilings", unit="case",
                                    disable=not progress):
        masks = ceiling_masks(gc, cands, labels, judges.get(gc.group))
        counts = json.dumps(candidate_counts(cands, labels), sort_keys=True)
        if loop and judges.get(gc.group) is not None:
            masks["loop"], edits = loop_mask(gc, judges[gc.group])
            counts = json.dumps({**json.loads(counts), **{f"loop_{k}": v for k, v in edits.items()}}, sort_keys=True)
        for name, mask in masks.items():
            m = score(mask, gc.gold, gc.spacing)
            rows.append({"case": gc.case, "segmenter": gc.segmenter, "row": name,
                         **{k: round(m[k], 4) for k in METRICS}, "candidates": counts})
    return rows, data


def summary_table(rows: list[dict], title: str, command: str) -> str:
    """Markdown: mean metrics per (segmenter, row), F1 per case."""
    segs = sorted({r["segmenter"] for r in rows})
    cases = sorted({r["case"] for r in rows})
    lines = [f"# {title}", "", f"Produced by `{command}`.", "",
             "| Segmenter | Row | n | " + " | ".join(METRICS) + " | " + " | ".join(f"F1[{c}]" for c in cases) + " |",
             "|---|---|---|" + "---|" * (len(METRICS) + len(cases))]
    for s in segs:
        for name in ROWS:
            rs = [r for r in rows if r["segmenter"] == s and r["row"] == name]
            if not rs:
                continue
            means = [np.mean([r[k] for r in rs]) * (1 if k in ("SD", "SSD") else 100) for k in METRICS]
            per = {r["case"]: 100 * r["F1"] for r in rs}
            lines.append(f"| {s} | {name} | {len(rs)} | " + " | ".join(f"{v:.2f}" for v in means) + " | "
                         + " | ".join(f"{per[c]:.2f}" if c in per else "" for c in cases) + " |")
    return "\n".join(lines) + "\n"


ROW_NOTES = {
    "initial": "the segmenter's mask",
    "classical": "drop specks + brightest-path bridging (conf/method/classical.yaml)",
    "ceiling_a": "gold-vetted joins and isolated-piece removals, made directly",
    "ceiling_b": "ceiling_a + gold-vetted prunes of attached structure inside the gold's scope",
    "scope": "the mask cut to the gold's scope box (false structure beyond the gold's extent, alone)",
    "judge_a": "the judge's joins (through the Inspector's join gate) and removals, made directly (a perfect "
               "editor); on dev the judge held out on the stack, on test the shipped one (trained on dev)",
    "judge_b": "judge_a + the judge's prunes",
    "loop": "NeuroRefiner: the learned agents with the held-out judge and the shipped editor (Algorithm 1)",
}


def judge_table(scores: dict[str, dict[str, float]]) -> str:
    lines = ["| Kind | labelled | true | flagged | precision | recall |", "|---|---|---|---|---|---|"]
    for kind, s in scores.items():
        lines.append(f"| {kind} | {s['n']} | {s['true']} | {s['flagged']} | {100 * s['precision']:.1f} | "
                     f"{100 * s['recall']:.1f} |")
    return "\n".join(lines) + "\n"


def ceilings(dataset: str, split: str, segmenters: Sequence[str], out: Path, loop: bool = True,
             limit: int | None = None, progress: bool = True) -> Path:
    """The ceilings table of a dataset's split: ``<out>/ceilings_<dataset>_<split>.md`` and ``.csv`` (on a test
    split the gold-vetted rows only: nothing is trained or run there)."""
    from neurorefiner.adaptation.judge.training import gold_cases, held_out_judges, held_out_scores, labelled_set
    from neurorefiner.errors import InputError
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv

    held_out = split == "test"
    if held_out and loop:
        raise InputError("on a test split the ceilings study only measures: pass --no-loop (the agents' row on "
                         "test stacks is the evaluation table's own)")
    cases = gold_cases(dataset, split, segmenters, limit)
    if held_out:   # beside a test table: gold labels to measure with, the shipped judge (trained on dev) as is
        from neurorefiner.agents.learned.judge import Judge
        from neurorefiner.agents.learned.roles import shipped_judge

        shipped = Judge.load(shipped_judge())
        data, judges = None, {c.group: shipped for c in cases}
    else:
        data, _ = labelled_set(cases, progress=progress)
        judges = held_out_judges(data)
    rows, _ = run_ceilings(cases, judges, progress=progress, loop=loop)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    segs = ",".join(segmenters)
    stamp = provenance(f"neurorefiner study ceilings --dataset {dataset} --split {split} --segmenters {segs} "
                       f"--out {out}" + ("" if loop else " --no-loop") + (f" --limit {limit}" if limit else ""))
    write_rows_csv(out / f"ceilings_{dataset}_{split}.csv", rows)
    kind = "SYNTHETIC" if dataset.startswith("synthetic") else "real data"
    md = summary_table(rows, f"Ceilings: {dataset} {split} ({kind})",
                       f"{stamp['command']}` on {stamp['date']} at commit `{stamp['commit']}")
    md += "\nRoot-seeded APP2, scored as the tables are; SD/SSD in voxels, PRE/REC/F1 in %.\n\n"
    md += "\n".join(f"- `{k}`: {v}" for k, v in ROW_NOTES.items()) + "\n"
    if data is not None:
        md += ("\nThe judge, leave one stack out (each stack's candidates judged by a judge trained on the other "
           "stacks, both segmenters' masks of a stack held out together; candidates of defect-cut copies of the "
               "masks included, see neurorefiner.adaptation.judge.augment):\n\n"
               + judge_table(held_out_scores(data, judges)))
    return write_markdown(out / f"ceilings_{dataset}_{split}.md", md)
