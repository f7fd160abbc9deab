"""Does TopoRefineNet follow its instruction? Held-out synthetic stage-1 defects, each edited three times:
with the correct instruction, with the same operation at a deliberately wrong location, and with the
opposite operation at the correct location. Writes per-sample rows (CSV) and a summary table (Markdown).

    python experiments/toporefinenet/evaluate_instructions.py --ckpt checkpoints/toporefinenet.ckpt \
        --n 64 --out experiments/toporefinenet/results/adherence_shipped

Data: the fixed validation defects of conf/refine_stage/stage1.yaml (synthetic defects cut into the gold
mask of DIADEM OP_6, a development stack; OP_7-OP_9 are never touched), crops as in that config.
Several checkpoints (``--ckpt a.ckpt --ckpt b.ckpt --label A --label B``) are compared on the same samples.
``--confine M`` adds, per checkpoint, the rows of the same edits confined to the named place grown by M
voxels (what ``TopoRefiner.edit`` returns by default, M = 4); without it the network's raw output only.

Figures per edit:
* adherence: share of changed voxels inside the region the given instruction names (NaN: nothing changed);
* fixed: share of the defect's voxels (input mask XOR gold) that the edit set right;
* dice_defect: Dice to gold inside the true defect's region (before: the input mask);
* betti0_err: |Betti-0(edited block) - Betti-0(gold block)|;
* changed: number of voxels changed.
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

OPPOSITE = {"connect": "remove", "repair": "remove", "remove": "repair"}


def wrong_location(ins):
    """Same operation and number of positions, at the place that overlaps the true region least (on the
    3 x 3 x 3 grid); ties go to the farthest start cell. One-position instructions get a disjoint cell;
    a connection that spans the whole block cannot be moved off it, only shrunk to another part."""
    from neurorefiner.agents.instructions import all_instructions

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
    return best


def opposite_operation(ins):
    from neurorefiner.agents.instructions import Instruction

    op = OPPOSITE[ins.op]
    if op == "repair" and ins.end is not None:
        op = "connect"
    return Instruction(op, ins.start, ins.end)


def dice(a: np.ndarray, b: np.ndarray) -> float:
    s = a.sum() + b.sum()
    return 1.0 if s == 0 else float(2 * (a & b).sum() / s)


def edit_figures(pred, mask, gold, named_region, true_region) -> dict:
    from neurorefiner.models.refine_module import betti0

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


def load_samples(n: int, seed: int, overrides: list[str], stage: int = 1) -> list[dict]:
    """The fixed validation samples of a stage's datamodule: stage 1 = synthetic defects, stage 2 = crops
    mined from the segmenters' real errors (its target as configured, ``local`` by default)."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"+stage={stage}", f"seed={seed}", *overrides])
    dm = instantiate(cfg.stages[str(stage)].datamodule, val_samples=n)
    return dm.val_items()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", action="append", required=True, help="checkpoint (repeat to compare)")
    ap.add_argument("--label", action="append", help="label per checkpoint (default: file stem)")
    ap.add_argument("--n", type=int, default=64, help="validation defects")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="output folder (rows.csv, summary.md)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="torch device for the network (cpu, cuda)")
    ap.add_argument("--stage", type=int, choices=(1, 2), default=1,
                    help="1: synthetic defects (stage-1 validation); 2: crops mined from segmenter errors")
    ap.add_argument("--confine", type=int, default=None, metavar="M",
                    help="also report the edits confined to the named place grown by M voxels")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for the data (e.g. dataset=tiny)")
    args = ap.parse_args(argv)

    import torch
    from tqdm import tqdm

    from neurorefiner.agents.instructions import parse_instruction
    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.io.atomic import atomic_path, write_text_atomic

    torch.set_num_threads(args.threads)
    labels = args.label or [Path(c).stem for c in args.ckpt]
    if len(labels) != len(args.ckpt):
        ap.error("give one --label per --ckpt")
    samples = load_samples(args.n, args.seed, args.overrides, args.stage)
    rows: list[dict] = []
    models: list[str] = []
    for label, ckpt in zip(labels, args.ckpt, strict=True):
        refiner = TopoRefiner.load(ckpt, device=args.device, cache_dir=ROOT / "data" / "cache" / "text_embeddings",
                                   confine_margin=None)
        confined_label = f"{label} + confined (margin {args.confine})"
        models += [label] + ([confined_label] if args.confine is not None else [])
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
                    if args.confine is not None:
                        preds[confined_label] = mask
                else:
                    raw = refiner.edit(image, mask, given.format())
                    named = given.region(mask.shape)
                    preds = {label: raw}
                    if args.confine is not None:
                        refiner.confine_margin = args.confine
                        allowed = refiner.allowed_region(given, mask.shape)
                        refiner.confine_margin = None
                        preds[confined_label] = np.where(allowed, raw, mask)
                for model, pred in preds.items():
                    rows.append({"model": model, "sample": i, "op": ins.op, "condition": kind,
                                 "instruction": "" if given is None else given.format(),
                                 "distractor": s.get("distractor", ""),
                                 **edit_figures(pred, mask, gold, named, true_region)})
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / "rows.csv") as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    what = ("Synthetic stage-1 defects (DIADEM OP_6 gold masks)" if args.stage == 1 else
            "Crops of OP_6 mined from the CPU segmenters' real errors (stage-2 validation; target = gold inside "
            "the named region)")
    lines = [f"{what}, n = {len(samples)} per condition; data overrides: {' '.join(args.overrides) or 'none'}. "
             "Mean (adherence over edits that changed something; that count in brackets).", "",
             "| model | condition | adherence | fixed | dice_defect | betti0_err | changed voxels |",
             "|---|---|---|---|---|---|---|"]
    for label in models:
        for kind in ["input (no edit)", "correct", "wrong location", "opposite operation"]:
            sel = [r for r in rows if r["model"] == label and r["condition"] == kind]
            adh = np.array([r["adherence"] for r in sel], dtype=float)
            ok = ~np.isnan(adh)
            adh_s = "-" if kind.startswith("input") else (f"{adh[ok].mean():.3f} ({ok.sum()})" if ok.any() else "nan")
            mean = {k: np.mean([r[k] for r in sel]) for k in ("fixed", "dice_defect", "betti0_err", "changed")}
            lines.append(f"| {label} | {kind} | {adh_s} | {mean['fixed']:.3f} | {mean['dice_defect']:.3f} | "
                         f"{mean['betti0_err']:.2f} | {mean['changed']:.0f} |")
    write_text_atomic(args.out / "summary.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
