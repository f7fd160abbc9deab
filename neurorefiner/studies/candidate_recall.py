"""How many of the breaks gold can see does the candidate search offer as joins?

A **gold-vetted break** of a mask: walking along the gold tree (resampled every 0.5 um), a stretch that leaves
one mask piece and reaches another (each node read as the piece of the nearest mask voxel within ``tol_um``),
inside the gold's scope; its gap is the gold's path length over the stretch not covered by either piece. A break
is **within reach** when that gap is at most ``reach_um`` (the Inspector's reach). The search *covers* it when
some join candidate joins the same two pieces. Reported per dataset and mask source: breaks within reach, how
many touch the tree (the largest piece: what the default search joins, ``joins_to_tree``; a chain of fragments
joins one round at a time), how many lie in such a chain (two or more gaps from the tree) or out of its reach
altogether (:func:`gaps_from_tree`), and the share covered, for the default search and for wider ones (a longer reach;
joins between loose pieces too). Command: ``neurorefiner study candidate-recall``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex
from neurorefiner.agents.candidates import CandidateSettings, find_candidates


def gold_breaks(labels: np.ndarray, gold: Any, spacing: Sequence[float], tol_um: float = 3.0,
                step_um: float = 0.5, scope: GoldIndex | None = None) -> dict[tuple[int, int], float]:
    """(piece a, piece b) with a < b -> the shortest gold-path gap between them (um), for every place where the
    gold leaves one mask piece and reaches another."""
    from scipy.spatial import cKDTree

    sp = np.asarray(spacing, float)
    dense = gold.resampled(step_um, tuple(sp))
    zyx = np.asarray(dense.zyx, float)
    if not len(zyx):
        return {}
    fg = np.argwhere(labels > 0)
    if not len(fg):
        return {}
    d, idx = cKDTree(fg * sp).query(zyx * sp, distance_upper_bound=tol_um)
    piece = np.zeros(len(zyx), int)
    hit = np.isfinite(d)
    piece[hit] = labels[tuple(fg[idx[hit]].T)]
    if scope is not None:
        inside = scope.in_scope(np.rint(zyx).astype(int))
    else:
        inside = np.ones(len(zyx), bool)
    parent = dense.parent_index
    seg = np.zeros(len(zyx))
    has = parent >= 0
    seg[has] = np.linalg.norm((zyx[has] - zyx[parent[has]]) * sp, axis=1)
    out: dict[tuple[int, int], float] = {}
    # from each covered node whose parent is not its own piece, walk up through uncovered nodes
    for i in np.flatnonzero(piece > 0):
        j, gap = parent[i], 0.0
        if j < 0 or piece[j] == piece[i]:
            continue
        start = i
        while j >= 0 and piece[j] == 0 and inside[j]:
            gap += seg[start]
            start, j = j, parent[j]
        if j < 0 or piece[j] == 0 or piece[j] == piece[i] or not (inside[i] and inside[j]):
            continue
        gap += seg[start] if piece[start] == 0 else 0.0
        key = (min(piece[i], piece[j]), max(piece[i], piece[j]))
        out[key] = min(out.get(key, np.inf), gap)
    return out


def gaps_from_tree(breaks: dict[tuple[int, int], float], tree: int) -> dict[tuple[int, int], int | None]:
    """Per break, how many gaps lie between the tree and its far piece along breaks within reach (1: it touches
    the tree; 2+: a chain of fragments, which the default search reaches one round at a time; None: no path
    of such breaks reaches the tree, e.g. fragments around another large piece)."""
    from collections import deque

    adj: dict[int, set[int]] = {}
    for a, b in breaks:
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    depth, todo = {tree: 0}, deque([tree])
    while todo:
        u = todo.popleft()
        for v in adj.get(u, ()):
            if v not in depth:
                depth[v] = depth[u] + 1
                todo.append(v)
    out: dict[tuple[int, int], int | None] = {}
    for a, b in breaks:
        known = [depth[p] for p in (a, b) if p in depth]
        out[(a, b)] = max(known) if known else None
    return out


SEARCHES: dict[str, dict] = {
    "default": {},
    "reach 12 um": {"reach_um": 12.0},
    "loose pieces too": {"joins_to_tree": False},
    "reach 12 um, loose pieces too": {"reach_um": 12.0, "joins_to_tree": False},
    "small pieces too (min 3 voxels)": {"join_min_size": 3},
}


def case_recall(image: np.ndarray, mask: np.ndarray, gold: Any, spacing: Sequence[float],
                reach_um: float = 8.0, searches: dict[str, dict] | None = None) -> dict[str, Any]:
    """Breaks within ``reach_um`` and the share each search covers (all breaks, and those touching the tree)."""
    base = CandidateSettings()
    cs = find_candidates(image, mask, spacing, base, kinds=("join",))
    index = GoldIndex(gold, spacing, mask.shape)
    breaks = {k: g for k, g in gold_breaks(cs.labels, gold, spacing, scope=index).items() if g <= reach_um}
    tree = {k for k in breaks if cs.main in k}
    depth = gaps_from_tree(breaks, cs.main)
    row: dict[str, Any] = {"breaks": len(breaks), "tree_breaks": len(tree),
                           "chain_breaks": sum(d is not None and d >= 2 for d in depth.values()),
                           "detached_breaks": sum(d is None for d in depth.values())}
    for name, change in (searches or SEARCHES).items():
        found = cs if not change else find_candidates(image, mask, spacing, replace(base, **change), kinds=("join",))
        pairs = {tuple(sorted(c.pieces)) for c in found.candidates}
        row[f"{name}: covered"] = sum(k in pairs for k in breaks)
        row[f"{name}: tree covered"] = sum(k in pairs for k in tree)
        row[f"{name}: joins"] = len(found.candidates)
    return row


def candidate_recall(dataset: str, split: str, sources: Sequence[str], out: Path, limit: int | None = None,
                     augment: int = 1, progress: bool = True, command: str = "") -> Path:
    """The table over a dataset split's masks (segmenters' masks and ``augment`` defect-cut copies of each; for
    source ``gold``, defect-cut copies of the rendered gold mask only)."""
    from tqdm import tqdm

    from neurorefiner.adaptation.judge.mining import GOLD_STRENGTH, _case_masks, check_source, dataset_cases
    from neurorefiner.adaptation.judge.training import GoldCase, augmented_masks
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv

    stamp = provenance(command)  # before this run writes its own tracked outputs (else the table reads +dirty)
    check_source(dataset, split)
    cases = dataset_cases(dataset, split, limit)
    rows = []
    for source in sources:
        masks = _case_masks(dataset, split, source, cases)
        for c in tqdm(cases, desc=f"candidate recall {dataset}/{source}", disable=not progress):
            img = c.image()
            spacing = tuple(float(v) for v in (c.spacing or img.spacing))
            image, gold = img.normalized(), c.gold()
            gc = GoldCase(c.name, source, image, masks[c.name], gold, spacing)  # type: ignore[arg-type]
            index = GoldIndex(gold, spacing, gc.mask.shape)
            variants = [] if source == "gold" else [(0, gc.mask)]
            strength = GOLD_STRENGTH if source == "gold" else 1
            variants += [(i + 1, m) for i, m in enumerate(augmented_masks(gc, augment, index, strength))]
            for v, m in variants:
                rows.append({"dataset": dataset, "case": c.name, "source": source, "variant": v,
                             **case_recall(image, m, gold, spacing)})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / f"candidate_recall_{dataset}.csv", rows)
    kind = "SYNTHETIC" if dataset.startswith("synthetic") else "real data"
    lines = [f"# Candidate recall: {dataset} {split} ({kind})", "",
             f"Produced by `{command}` on {stamp['date']} at commit `{stamp['commit']}`.", "",
             "Gold-vetted breaks within the 8 um reach (neurorefiner.studies.candidate_recall) and the share the "
             "join search covers; `tree`: breaks with the tree (the largest piece) on one side, the ones the "
             "default search is meant to offer this round. Variant 0: the mask itself; 1..: defect-cut copies.", "",
             "| search | masks | breaks | covered % | tree breaks | tree covered % | joins offered |",
             "|---|---|---|---|---|---|---|"]
    for subset, rs in (("segmenter masks", [r for r in rows if r["variant"] == 0]),
                       ("defect-cut copies", [r for r in rows if r["variant"] > 0])):
        if not rs:
            continue
        for name in SEARCHES:
            b, t = sum(r["breaks"] for r in rs), sum(r["tree_breaks"] for r in rs)
            cov, tcov = sum(r[f"{name}: covered"] for r in rs), sum(r[f"{name}: tree covered"] for r in rs)
            lines.append(f"| {name} ({subset}) | {len(rs)} | {b} | {100 * cov / max(b, 1):.1f} | {t} | "
                         f"{100 * tcov / max(t, 1):.1f} | {sum(r[f'{name}: joins'] for r in rs)} |")
    lines.append("")
    for subset, rs in (("segmenter masks", [r for r in rows if r["variant"] == 0]),
                       ("defect-cut copies", [r for r in rows if r["variant"] > 0])):
        if rs:
            lines.append(f"- {subset}: of {sum(r['breaks'] for r in rs)} breaks, {sum(r['tree_breaks'] for r in rs)} "
                         f"touch the tree, {sum(r['chain_breaks'] for r in rs)} lie in a chain (two or more gaps from "
                         f"it) and {sum(r['detached_breaks'] for r in rs)} are out of its reach altogether.")
    return write_markdown(out / f"candidate_recall_{dataset}.md", "\n".join(lines) + "\n")
