"""Does TopoRefineNet follow its instruction? Every held-out defect is edited three times: with the correct
instruction, with the same operation at a deliberately wrong location, and with the opposite operation at
the correct location (plus the untouched input). Several checkpoints are compared on the same samples.

Samples are a training stage's fixed validation items (``conf/refine_stage/``): stage 1 = synthetic defects
cut into the gold mask of the validation case (DIADEM OP_6 by default), stage 2 = crops mined from the
segmenters' real errors. Figures per edit (:func:`edit_figures`): adherence, fixed, dice_defect, betti0_err,
changed voxels. :func:`write_by_operation` splits a table's ``fixed`` share by operation.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.defects.describe import betti0
from neurorefiner.evaluation.tables import write_markdown
from neurorefiner.paths import cache_dir, conf_dir
from neurorefiner.topology.instructions import Instruction, all_instructions

OPPOSITE = {"connect": "remove", "repair": "remove", "remove": "repair"}
CONDITIONS = ("input (no edit)", "correct", "wrong location", "opposite operation")
OPERATIONS = ("connect", "repair", "remove")


def wrong_location(ins: Instruction) -> Instruction:
    """Same operation and number of positions, at the place that overlaps the true region least (on the
    3 x 3 x 3 grid); ties go to the farthest start cell. One-position instructions get a disjoint cell;
    a connection that spans the whole block cannot be moved off it, only shrunk to another part."""
    grid = (3, 3, 3)
    true_region = ins.region(grid)
    start = np.array(ins.start.cell)
    best, best_key = None, None
    for cand in all_instructions():
        if cand.op != ins.op or (cand.end is None) != (ins.end is None) or cand == ins:
            continue
        r = cand.region(grid)
        overlap = (r & true_region).sum() / r.sum()
        key = (overlap, -float(np.abs(np.array(cand.start.cell) - start).sum()), cand.format())
        if best_key is None or key < best_key:
            best, best_key = cand, key
    assert best is not None
    return best


def opposite_operation(ins: Instruction) -> Instruction:
    """The operation that undoes ``ins`` (a break fill <-> a removal), at the same place."""
    op = OPPOSITE[ins.op]
    if op == "repair" and ins.end is not None:
        op = "connect"
    return Instruction(op, ins.start, ins.end)


def dice(a: np.ndarray, b: np.ndarray) -> float:
    s = a.sum() + b.sum()
    return 1.0 if s == 0 else float(2 * (a & b).sum() / s)


def edit_figures(pred: np.ndarray, mask: np.ndarray, gold: np.ndarray, named_region: np.ndarray,
                 true_region: np.ndarray) -> dict:
    """adherence: share of changed voxels inside the region the given instruction names (NaN: nothing
    changed); fixed: share of the defect's voxels (input XOR gold) set right; dice_defect: Dice to gold in
    the true defect's region; betti0_err: |Betti-0(edit) - Betti-0(gold)|; changed: voxels changed."""
    changed = pred ^ mask
    n = int(changed.sum())
    defect = mask ^ gold
    return {
        "adherence": float((changed & named_region).sum() / n) if n else float("nan"),
        "fixed": float((defect & (pred == gold)).sum() / max(int(defect.sum()), 1)),
        "dice_defect": dice(pred & true_region, gold & true_region),
        "betti0_err": abs(betti0(pred) - betti0(gold)),
        "changed": n,
    }


def load_samples(n: int, seed: int = 0, overrides: Sequence[str] = (), stage: int = 1) -> list[dict]:
    """The fixed validation samples of a stage's datamodule, composed from ``conf/train.yaml`` with
    ``overrides`` (e.g. ``stages.1.datamodule.distractor_prob=0.0``)."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=[f"+stage={stage}", f"seed={seed}", *overrides])
    dm = instantiate(cfg.stages[str(stage)].datamodule, val_samples=n)
    return dm.val_items()


def evaluate_instructions(checkpoints: Sequence[str | Path], labels: Sequence[str], samples: Sequence[dict],
                          device: str = "cpu", confine: int | None = None,
                          decoding: str = "raw") -> tuple[list[dict], list[str]]:
    """Per-edit rows for every checkpoint, condition and sample, and the model labels in table order
    (with ``confine``: each model also as its edits confined to the named place grown by that margin).
    ``decoding="raw"`` measures the network alone (thresholded output, unconfined); ``"topology"`` the
    editor's component-wise decoding as ``TopoRefiner.edit`` applies it."""
    from tqdm import tqdm

    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.topology.instructions import parse_instruction

    if len(labels) != len(checkpoints):
        raise ValueError("give one label per checkpoint")
    rows: list[dict] = []
    models: list[str] = []
    for label, ckpt in zip(labels, checkpoints, strict=True):
        refiner = TopoRefiner.load(ckpt, device=device, cache_dir=cache_dir() / "text_embeddings",
                                   confine_margin=None, decoding=decoding)
        confined_label = f"{label} + confined (margin {confine})"
        models += [label] + ([confined_label] if confine is not None else [])
        for i, s in enumerate(tqdm(samples, desc=label)):
            image = s["image"][0].numpy()
            mask = s["mask"][0].numpy() > 0
            gold = s["target"][0].numpy() > 0
            true_region = s["region"][0].numpy().astype(bool)
            ins = parse_instruction(s["instruction"])
            kinds = {"input (no edit)": None, "correct": ins, "wrong location": wrong_location(ins),
                     "opposite operation": opposite_operation(ins)}
            for kind, given in kinds.items():
                if given is None:
                    preds, named = {label: mask}, true_region
                    if confine is not None:
                        preds[confined_label] = mask
                else:
                    raw = refiner.edit(image, mask, given.format())
                    named = given.region(mask.shape)
                    preds = {label: raw}
                    if confine is not None:
                        refiner.confine_margin = confine
                        allowed = refiner.allowed_region(given, mask.shape)
                        refiner.confine_margin = None
                        preds[confined_label] = np.where(allowed, raw, mask)
                for model, pred in preds.items():
                    rows.append({"model": model, "sample": i, "op": ins.op, "condition": kind,
                                 "instruction": "" if given is None else given.format(),
                                 "distractor": s.get("distractor", ""),
                                 **edit_figures(pred, mask, gold, named, true_region)})
    return rows, models


def summary_markdown(rows: Sequence[dict], models: Sequence[str], n: int, stage: int,
                     overrides: Sequence[str] = ()) -> str:
    """Means per model and condition (adherence over edits that changed something; that count in brackets)."""
    what = ("Synthetic stage-1 defects (DIADEM OP_6 gold masks)" if stage == 1 else
            "Crops of OP_6 mined from the CPU segmenters' real errors (stage-2 validation; target = gold inside "
            "the named region)")
    lines = [f"{what}, n = {n} per condition; data overrides: {' '.join(overrides) or 'none'}. "
             "Mean (adherence over edits that changed something; that count in brackets).", "",
             "| model | condition | adherence | fixed | dice_defect | betti0_err | changed voxels |",
             "|---|---|---|---|---|---|---|"]
    for label in models:
        for kind in CONDITIONS:
            sel = [r for r in rows if r["model"] == label and r["condition"] == kind]
            adh = np.array([r["adherence"] for r in sel], dtype=float)
            ok = ~np.isnan(adh)
            adh_s = "-" if kind.startswith("input") else (f"{adh[ok].mean():.3f} ({ok.sum()})" if ok.any() else "nan")
            mean = {k: np.mean([float(r[k]) for r in sel]) for k in ("fixed", "dice_defect", "betti0_err", "changed")}
            lines.append(f"| {label} | {kind} | {adh_s} | {mean['fixed']:.3f} | {mean['dice_defect']:.3f} | "
                         f"{mean['betti0_err']:.2f} | {mean['changed']:.0f} |")
    return "\n".join(lines) + "\n"


def by_operation_markdown(rows: Sequence[dict], source: str = "rows.csv") -> str:
    """Mean share of the defect fixed per model, condition and operation (connect / repair = breaks,
    remove = noise and foreign fragments); n in brackets."""
    fixed: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["condition"] != "input (no edit)":
            fixed[(r["model"], r["condition"], r["op"])].append(float(r["fixed"]))
    lines = [f"Share of the defect fixed, by operation ({source}); n in brackets.", "",
             "| model | condition | connect | repair | remove |", "|---|---|---|---|---|"]
    for model, condition in dict.fromkeys((m, c) for m, c, _ in fixed):
        cells = []
        for op in OPERATIONS:
            v = fixed.get((model, condition, op), [])
            cells.append(f"{sum(v) / len(v):.3f} ({len(v)})" if v else "-")
        lines.append(f"| {model} | {condition} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_by_operation(folder: Path) -> Path:
    """``by_operation.md`` beside the ``rows.csv`` of an instruction-following table."""
    with open(folder / "rows.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return write_markdown(folder / "by_operation.md", by_operation_markdown(rows, f"{folder.name}/rows.csv"))


def run(checkpoints: Sequence[str | Path], out: Path, labels: Sequence[str] | None = None, n: int = 64,
        seed: int = 0, stage: int = 1, overrides: Sequence[str] = (), device: str = "cpu",
        confine: int | None = None, decoding: str = "raw") -> str:
    """Evaluate, then write ``rows.csv``, ``summary.md`` and ``by_operation.md`` into ``out``; returns the
    summary table."""
    from neurorefiner.evaluation.tables import write_rows_csv

    labels = list(labels) if labels else [Path(c).stem for c in checkpoints]
    samples = load_samples(n, seed, overrides, stage)
    rows, models = evaluate_instructions(checkpoints, labels, samples, device=device, confine=confine,
                                         decoding=decoding)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / "rows.csv", rows)
    summary = summary_markdown(rows, models, len(samples), stage, overrides)
    write_markdown(out / "summary.md", summary)
    write_by_operation(out)
    return summary
