"""What the loop's retries make of an edit the editor declined (``loop.retry_declined``, experiments/declined_retry/).

Two readings:

* :func:`retry_counts`: in one trace, the editor calls that declined an edit on the evidence, the defects with such a
  call, and the edits a later try of the same defect got accepted: each of those is a window found past the editor's
  own refusal.
* :func:`tree_gain`: what one mask's soma tree (the piece at the gold root) holds that another's does not, each piece
  with its distance to the gold tree: a piece far from the gold is a false attachment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from neurorefiner.topology.components import label_components

# how the decoding words a decline, for traces written before the editor's record carried ``declined``
DECLINE_WORDS = ("over the limits", "nothing removed:")


@dataclass
class RetryCounts:
    """One trace's declines and what the retries made of them."""

    editor_calls: int = 0
    declined_calls: int = 0
    declined_defects: int = 0
    accepted_after_decline: int = 0


def _declined(record: dict) -> bool:
    decision = record.get("decision") or {}
    if "declined" in decision:
        return bool(decision["declined"])
    raw = str(record.get("raw") or "")
    return any(w in raw for w in DECLINE_WORDS)


def retry_counts(trace: Path) -> RetryCounts:
    """The counts of :class:`RetryCounts` in ``trace`` (a loop's JSONL); a defect is (round, block, defect)."""
    counts = RetryCounts()
    seen: set[tuple] = set()
    for line in Path(trace).read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") != "decision" or rec.get("role") not in ("editor", "validator"):
            continue
        key = (rec["round"], rec["block"], rec["defect"])
        if rec["role"] == "editor":
            counts.editor_calls += 1
            if _declined(rec):
                counts.declined_calls += 1
                if key not in seen:
                    seen.add(key)
                    counts.declined_defects += 1
        elif key in seen and (rec.get("decision") or {}).get("accept"):
            counts.accepted_after_decline += 1
    return counts


@dataclass
class GainedPiece:
    """A connected piece of the voxels one soma tree holds and the other does not."""

    voxels: int
    gold_median_voxels: float   # median distance of its voxels to the gold tree's nodes
    near_gold_share: float      # share of its voxels within ``near`` voxels of a gold node
    box: tuple[tuple[int, int], ...]


def soma_tree(mask: np.ndarray, root_zyx: tuple[float, float, float], spacing: tuple[float, float, float]
              ) -> np.ndarray:
    """The piece of ``mask`` at the soma (:class:`~neurorefiner.agents.soma_guard.SomaPiece`: the piece holding the
    foreground voxel nearest in um to ``root_zyx``, voxel units); empty for an empty mask."""
    from neurorefiner.agents.soma_guard import SomaPiece

    soma = SomaPiece.of(mask, root_zyx, spacing)
    return np.zeros(np.shape(mask), bool) if soma is None else soma.piece


def tree_gain(mask_a: np.ndarray, mask_b: np.ndarray, root_zyx: tuple[float, float, float], gold_zyx: np.ndarray,
              spacing: tuple[float, float, float] = (1.0, 1.0, 1.0), near: float = 3.0,
              top: int = 5) -> list[GainedPiece]:
    """The ``top`` largest pieces of A's soma tree that B's soma tree lacks, each measured against the gold nodes
    (``gold_zyx``, voxels)."""
    gained = (soma_tree(np.asarray(mask_a) > 0, root_zyx, spacing)
              & ~soma_tree(np.asarray(mask_b) > 0, root_zyx, spacing))
    labels, n = label_components(gained)
    if not n:
        return []
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    gold = cKDTree(np.asarray(gold_zyx, dtype=float))
    out = []
    for k in [int(k) for k in np.argsort(-sizes)[:top] if sizes[k]]:
        idx = np.argwhere(labels == k)
        d, _ = gold.query(idx)
        box = tuple((int(lo), int(hi) + 1) for lo, hi in zip(idx.min(0), idx.max(0)))
        out.append(GainedPiece(int(sizes[k]), float(np.median(d)), float((d <= near).mean()), box))
    return out
