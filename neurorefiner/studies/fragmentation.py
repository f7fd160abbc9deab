"""How a segmentation breaks along the gold path: the measure that decides where refinement starts.

A root-seeded APP2 trace can follow only the mask's piece that holds the root, so what an initial mask leaves
for the refiner is told by how the gold path falls apart in it, not by Dice:

* ``covered``: the share of gold length with a mask voxel within ``tol_um``;
* ``segments``: the runs the gold path falls into (consecutive gold points on one mask piece form a run; a
  gap or a change of piece starts a new one), and ``breaks_per_mm`` = (runs - 1) per mm of gold;
* ``pieces``: how many mask pieces the gold path touches;
* ``root_piece``: the share of gold length on the piece at the gold root (the mask voxel nearest it, as the
  root-seeded protocol seeds APP2): an upper bound of that trace's recall.

The SYNTHETIC stand-ins are calibrated against DIADEM dev's U-Net masks with it (``neurorefiner study
fragmentation``), never by editing masks or rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv
from neurorefiner.io.swc import Tree

KEYS = ("gold_mm", "covered", "segments", "breaks_per_mm", "pieces", "root_piece")


def fragmentation(mask: np.ndarray, gold: Tree, spacing: Sequence[float], tol_um: float = 2.0,
                  step_um: float = 1.0) -> dict[str, float]:
    """The fragmentation of ``mask`` (ZYX bool) along ``gold`` (voxel coordinates), distances in micrometres."""
    import cc3d
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    sp = np.asarray(spacing, np.float64)
    if not len(gold):
        raise InputError("the gold tree is empty: nothing to measure fragmentation along")
    dense = gold.resampled(step_um, tuple(sp))
    zyx = np.asarray(dense.zyx, np.float64)
    parent = dense.parent_index
    child = np.flatnonzero(parent >= 0)
    edge_um = np.linalg.norm((zyx[child] - zyx[parent[child]]) * sp, axis=1)
    gold_um = float(edge_um.sum())

    labels = cc3d.connected_components(np.asarray(mask, bool), connectivity=26)
    fg = np.argwhere(labels > 0)
    node_label = np.zeros(len(zyx), np.int64)
    root_label = 0
    if len(fg):
        tree = cKDTree(fg * sp)
        d, i = tree.query(zyx * sp, distance_upper_bound=tol_um)
        hit = np.isfinite(d)
        node_label[hit] = labels[tuple(fg[i[hit]].T)]
        roots = np.flatnonzero(parent < 0)
        _, ri = tree.query(zyx[roots[0]] * sp)  # the protocol's seed: the mask voxel nearest the gold root
        root_label = int(labels[tuple(fg[ri])])

    # an edge counts for a label when both its ends lie on it; half an edge per end otherwise
    a, b = node_label[child], node_label[parent[child]]
    same = (a == b) & (a > 0)

    def length_on(on_a: np.ndarray, on_b: np.ndarray) -> float:
        return float(edge_um[same & on_a].sum() + 0.5 * (edge_um[~same & on_a].sum() + edge_um[~same & on_b].sum()))

    covered_um = length_on(a > 0, b > 0)
    root_um = length_on(a == root_label, b == root_label) if root_label else 0.0
    # runs: the gold graph with only the edges that stay on one piece, counted over covered points
    n = len(zyx)
    graph = coo_matrix((np.ones(int(same.sum())), (child[same], parent[child][same])), shape=(n, n))
    _, comp = connected_components(graph, directed=False)
    segments = int(np.unique(comp[node_label > 0]).size)
    return {"gold_mm": gold_um / 1000.0, "covered": covered_um / max(gold_um, 1e-9), "segments": segments,
            "breaks_per_mm": max(segments - 1, 0) / max(gold_um / 1000.0, 1e-9),
            "pieces": int(np.unique(node_label[node_label > 0]).size),
            "root_piece": root_um / max(gold_um, 1e-9)}


def dataset_fragmentation(dataset: str, split: str, segmenter: str, limit: int | None = None,
                          tol_um: float = 2.0, progress: bool = True) -> list[dict]:
    """One row per case of ``dataset``/``split``, its initial mask from the cache (made on first use)."""
    from tqdm import tqdm

    from neurorefiner.data.registry import get_dataset
    from neurorefiner.inference.init_masks import write_init_masks
    from neurorefiner.io.stacks import read_mask

    cases = get_dataset(dataset).cases(split)[: limit or None]
    paths = {p.stem: p for p in write_init_masks(dataset, segmenter, None, split, None, False,
                                                 only=[c.name for c in cases], progress=progress)}
    rows = []
    for c in tqdm(cases, desc=f"fragmentation {dataset}", unit="case", disable=not progress):
        mask = read_mask(paths[c.name]).load() > 0
        spacing = tuple(float(v) for v in (c.spacing or c.image().spacing))
        rows.append({"dataset": dataset, "split": split, "segmenter": segmenter, "case": c.name,
                     **fragmentation(mask, c.gold(), spacing, tol_um=tol_um)})
    return rows


def summarise(rows: Sequence[dict]) -> list[dict]:
    """Means per (dataset, split, segmenter); breaks per mm pooled over gold length, the rest per case."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["split"], r["segmenter"]), []).append(r)
    out = []
    for (ds, split, seg), rs in groups.items():
        mm = sum(r["gold_mm"] for r in rs)
        out.append({"dataset": ds, "split": split, "segmenter": seg, "n": len(rs),
                    "gold_mm": mm / len(rs), "covered": float(np.mean([r["covered"] for r in rs])),
                    "segments": float(np.mean([r["segments"] for r in rs])),
                    "breaks_per_mm": sum(max(r["segments"] - 1, 0) for r in rs) / max(mm, 1e-9),
                    "pieces": float(np.mean([r["pieces"] for r in rs])),
                    "root_piece": float(np.mean([r["root_piece"] for r in rs]))})
    return out


def write_report(rows: Sequence[dict], out: Path, name: str = "fragmentation") -> str:
    """``<name>.md`` (summary + per case, with date and commit) and ``<name>_cases.csv`` under ``out``."""
    if not rows:
        raise InputError("no fragmentation rows to write")
    stamp = provenance("neurorefiner study fragmentation")
    head = "| dataset | split | segmenter | n | gold mm | covered % | runs | breaks / mm | pieces | root piece % |"
    lines = [f"# Fragmentation along the gold path\n\nMade {stamp['date']} at commit {stamp['commit']} by "
             f"`{stamp['command']}` (see `run.sh` beside this file). Synthetic presets are SYNTHETIC stand-ins. "
             "`root piece` bounds a root-seeded trace's recall; `breaks / mm` pools the runs over gold length.\n",
             head, "|" + "---|" * 10]
    for s in summarise(rows):
        lines.append(f"| {s['dataset']} | {s['split']} | {s['segmenter']} | {s['n']} | {s['gold_mm']:.2f} | "
                     f"{100 * s['covered']:.1f} | {s['segments']:.1f} | {s['breaks_per_mm']:.2f} | "
                     f"{s['pieces']:.1f} | {100 * s['root_piece']:.1f} |")
    lines += ["", "Per case:", "", "| case | " + " | ".join(KEYS) + " |", "|" + "---|" * (len(KEYS) + 1)]
    for r in rows:
        lines.append(f"| {r['case']} | " + " | ".join(f"{r[k]:.3g}" for k in KEYS) + " |")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    write_markdown(out / f"{name}.md", text)
    write_rows_csv(out / f"{name}_cases.csv", rows, ["dataset", "split", "segmenter", "case", *KEYS])
    return text
