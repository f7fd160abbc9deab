"""Rows for the segmenter tables: per segmenter, masks -> APP2 -> reconstruction metrics on a test split,
plus the naive floor (Otsu + dust removal + TEASAR skeleton, largest component / every component) and
voxel figures of each mask against the gold mask (Dice, clDice, Betti-0 excess = components in the mask
minus components in the gold mask: the fragments and noise blobs refinement has to fix).

Writes <out>/<dataset>_<split>_cases.csv (one row per case and method) and <out>/<dataset>_<split>.md
(means). Masks of learned segmenters are written through neurorefiner.inference.init_masks: the segmenter's
row uses the post-processing its checkpoint records (``inference.postprocess_mask``; cached under
data/cache/init_masks/<dataset>/<segmenter>_postprocessed/); ``--raw`` adds the masks refinement starts
from (threshold only, every component kept; data/cache/init_masks/<dataset>/<segmenter>/). The test
split is used for reporting only.

    python experiments/segmenters/rows.py --dataset diadem --split test \
        --segmenter unet3d=checkpoints/segmenters/unet3d_diadem_cpu.pt --raw --threads 1
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from neurorefiner.baselines.naive import otsu_mask, teasar_tree
from neurorefiner.data import get_dataset
from neurorefiner.inference.init_masks import write_init_masks
from neurorefiner.io import read_mask
from neurorefiner.metrics import score_mask, score_trees
from neurorefiner.metrics.voxel import betti_numbers, cldice, dice

COLS = ["method", "case", "SD", "SSD", "pSSD", "PRE", "REC", "F1", "MES", "Dice", "clDice", "b0_mask", "b0_gold",
        "b0_excess", "seconds"]


def voxel_row(mask: np.ndarray, gold_mask: np.ndarray) -> dict[str, float]:
    b0m, b0g = betti_numbers(mask)[0], betti_numbers(gold_mask)[0]
    return {"Dice": dice(mask, gold_mask), "clDice": cldice(mask, gold_mask), "b0_mask": b0m, "b0_gold": b0g,
            "b0_excess": b0m - b0g}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="diadem")
    p.add_argument("--split", default="test")
    p.add_argument("--segmenter", action="append", default=[],
                   help="arch=checkpoint (repeatable); arch[:variant]=checkpoint tells two checkpoints of one "
                        "network apart (rows 'arch:variant', masks cached under their own folders)")
    p.add_argument("--no-naive", action="store_true")
    p.add_argument("--dust", type=int, default=0,
                   help="also score each segmenter's mask after removing components under this many voxels "
                        "(the first round's diagnostic row); 0: skip")
    p.add_argument("--raw", action="store_true",
                   help="also score each segmenter's mask without the component filters (its recorded threshold "
                        "only, wide windows): the Betti-0 excess of what the network itself produces")
    p.add_argument("--cases", nargs="*", default=None, help="only these cases (e.g. the validation case OP_6)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads for the segmenters")
    p.add_argument("--include", action="append", default=[],
                   help="rows of an earlier run (its *_cases.csv; repeatable) to put in this table, after the "
                        "naive floor: merges per-segmenter runs without recomputing them; where two hold a row "
                        "of the same method and case the first given wins. With --no-naive and no --segmenter "
                        "the run only merges (no volume is loaded)")
    p.add_argument("--stem", default=None, help="output file stem (default <dataset>_<split>[_<cases>])")
    p.add_argument("--plot", action="store_true", help="also <stem>.png: per-case F1 and SSD of every method")
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    cases = get_dataset(a.dataset).cases(a.split)
    keep = [i for i, c in enumerate(cases) if not a.cases or c.name in a.cases]
    synthetic = bool(cases and cases[0].info.get("synthetic"))

    from neurorefiner.inference.init_masks import mask_dir, shipped_checkpoint
    from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess

    masks: dict[str, dict[str, Path]] = {}
    names = [cases[i].name for i in keep]
    for spec in a.segmenter:
        name, _, ckpt = spec.partition("=")
        arch, _, variant = name.partition(":")
        folder = f"{arch}_{variant}" if variant else arch  # the plain name's folder holds refinement's M_init
        # the segmenter's own row: the checkpoint's recorded post-processing, wide windows
        post = recorded_postprocess(load_segmenter(ckpt or shipped_checkpoint(arch, a.dataset)))
        paths = write_init_masks(a.dataset, arch, ckpt or None, a.split, only=a.cases, post=post,
                                 out_dir=mask_dir(a.dataset, f"{folder}_postprocessed"), cache_probs=True)
        p = post.as_dict()
        masks[own_label(name, p)] = dict(zip(names, paths, strict=True))
        if a.raw:
            # the masks refinement starts from (init_masks' default: every component kept, no bridging)
            masks[raw_label(name, p)] = dict(zip(
                names, write_init_masks(a.dataset, arch, ckpt or None, a.split, only=a.cases, cache_probs=True,
                                        out_dir=mask_dir(a.dataset, folder)), strict=True))
    rows = []
    work = keep if masks or not a.no_naive else []  # a pure merge (--include only) loads no volume
    for i in work:
        case = cases[i]
        image = case.image().load()
        gold = case.gold()
        gold_mask = case.label(image.shape)
        sp = case.spacing or (1.0, 1.0, 1.0)
        if not a.no_naive:
            t = time.perf_counter()
            m = otsu_mask(image)
            seg_s = time.perf_counter() - t
            vox = voxel_row(m, gold_mask)
            for label, largest in (("naive floor: Otsu+TEASAR, largest component", True),
                                   ("naive floor: Otsu+TEASAR, every component", False)):
                t = time.perf_counter()
                tree = teasar_tree(m, sp, largest_only=largest)
                rows.append({"method": label, "case": case.name, **score_trees(gold, tree, sp), **vox,
                             "seconds": seg_s + time.perf_counter() - t})
                print(rows[-1])
            t = time.perf_counter()
            rows.append({"method": "naive floor: Otsu -> APP2", "case": case.name,
                         **{k: v for k, v in score_mask(gold, m, sp).items() if k in COLS}, **vox,
                         "seconds": seg_s + time.perf_counter() - t})
            print(rows[-1])
        for name, paths in masks.items():
            m = read_mask(paths[case.name]).load() > 0
            t = time.perf_counter()
            rows.append({"method": f"{name} -> APP2", "case": case.name,
                         **{k: v for k, v in score_mask(gold, m, sp).items() if k in COLS},
                         **voxel_row(m, gold_mask), "seconds": time.perf_counter() - t})
            print(rows[-1])
            if a.dust > 0:
                import cc3d

                t = time.perf_counter()
                md = cc3d.dust(m, threshold=a.dust, connectivity=26, in_place=False)
                rows.append({"method": f"{name} + dust removal ({a.dust} voxels) -> APP2", "case": case.name,
                             **{k: v for k, v in score_mask(gold, md, sp).items() if k in COLS},
                             **voxel_row(md, gold_mask), "seconds": time.perf_counter() - t})
                print(rows[-1])
    for path in a.include:
        rows.extend(r for r in read_rows(path) if r["case"] in names)
    rows = first_of_each(rows)
    stem = a.stem or f"{a.dataset}_{a.split}" + (f"_{'_'.join(a.cases)}" if a.cases else "")
    title = f"{a.dataset} {a.split} split ({', '.join(names)}{', SYNTHETIC data' if synthetic else ''})"
    print(write_tables(rows, Path(a.out), stem, title))
    if a.plot:
        print("wrote", plot_rows(rows, Path(a.out) / f"{stem}.png", title))


def plot_rows(rows: list[dict], path: Path, title: str) -> Path:
    """Per-case F1 and SSD of every method side by side (dots = cases, bar = mean), atomically: a spread
    over three test stacks says more than a mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(methods) + 1.5), sharey=True)
    for ax, key, xlabel in ((axes[0], "F1", "F1 (tau 4 voxels), higher is better"),
                            (axes[1], "SSD", "SSD (voxels), lower is better")):
        for i, mth in enumerate(methods):
            vals = [r[key] for r in rows if r["method"] == mth]
            ax.barh(i, float(np.mean(vals)), color="0.8")
            ax.plot(vals, [i] * len(vals), "o", color="k", ms=3)
        ax.set_xlabel(xlabel)
    axes[0].set_yticks(range(len(methods)), [m.replace(" -> APP2", "") for m in methods], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path)
    return path


def own_label(name: str, post: dict) -> str:
    """The table label of a segmenter's own row: its recorded post-processing (``PostProcess.as_dict()``).
    summary.py finds rows by this label, so it is built in one place."""
    return (f"{name} (threshold {post['threshold']}, "
            + (f"gaps bridged up to {post['bridge_um']:g} um, " if post.get("bridge_um") else "")
            + f"dust {post['dust_voxels']}, keep largest {post['keep_largest'] or 'all'})")


def raw_label(name: str, post: dict) -> str:
    """The label of the threshold-only masks (``--raw``; what refinement starts from)."""
    return f"{name} (threshold {post['threshold']} only, no component filter)"


def first_of_each(rows: list[dict]) -> list[dict]:
    """One row per (method, case), the first seen: an earlier run merged with --include may carry rows this
    run made afresh (the naive floor), and a duplicate would count twice in the plot."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        key = (r["method"], r["case"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a ``*_cases.csv`` written by :func:`write_tables` (numbers back to floats)."""
    from neurorefiner.errors import InputError

    path = Path(path)
    if not path.exists():
        raise InputError("rows file not found", path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or set(rows[0]) != set(COLS):
        raise InputError(f"not a rows file (expected columns {COLS})", path)
    return [{k: (v if k in ("method", "case") else float(v)) for k, v in r.items()} for r in rows]


def write_tables(rows: list[dict], out: Path, stem: str, title: str) -> str:
    """``<stem>_cases.csv`` (every row) and ``<stem>.md`` (means per method, in first-seen order), atomically;
    returns the markdown."""
    from neurorefiner.io.atomic import atomic_path, write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / f"{stem}_cases.csv") as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLS)
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{r[k]:.4f}" if isinstance(r.get(k), float) else r.get(k)) for k in COLS})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    keys = ["PRE", "REC", "F1", "SD", "SSD", "MES", "Dice", "clDice", "b0_excess"]
    lines = [f"# {title}", "",
             "Means over cases; SD/SSD in voxels (V3D neuron_distance), PRE/REC/F1/MES with tau = 4 voxels; "
             "b0_excess = connected components of the mask minus those of the gold mask.", "",
             "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for mth in methods:
        rs = [r for r in rows if r["method"] == mth]
        vals = [float(np.mean([r[k] for r in rs])) for k in keys]
        lines.append(f"| {mth} | " + " | ".join(f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}" for v in vals) + " |")
    text = "\n".join(lines) + "\n"
    write_text_atomic(out / f"{stem}.md", text)
    return text


if __name__ == "__main__":
    main()
