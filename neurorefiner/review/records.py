"""The ``review`` record a saved review appends to ``trace.jsonl``: who decided what, when, on which mask.

One record per save: the time (UTC), the mask file it wrote and its hash, the hash of the refined mask it
started from, each edit the person decided on (its id, round, block, defect, try, the agents' verdict and
the person's), and the painted correction as window masks (as the trace stores edits), so a trace alone
rebuilds the reviewed mask and a later review starts where the last one stopped. ``refine.py`` and the
report read only the record types they know, so the new type does not disturb a resume or a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import numpy as np

from neurorefiner.agents.trace import decode_mask, encode_mask
from neurorefiner.topology.blocks import slices_from_list, slices_to_list

REVIEW = "review"
REVIEW_VERSION = 1
ADD, REMOVE = 1, 2   # label values of a painted correction


def encode_paint(correction: np.ndarray | None) -> dict | None:
    """A correction label volume (0 none, 1 add, 2 remove) as its bounding window and two window masks."""
    if correction is None or not np.any(correction):
        return None
    c = np.asarray(correction)
    nz = np.nonzero(c)
    window = tuple(slice(int(i.min()), int(i.max()) + 1) for i in nz)
    crop = c[window]
    return {"window": slices_to_list(window), "add": encode_mask(crop == ADD), "remove": encode_mask(crop == REMOVE),
            "added": int((crop == ADD).sum()), "removed": int((crop == REMOVE).sum())}


def decode_paint(paint: dict | None, shape: Sequence[int]) -> np.ndarray:
    """The label volume of :func:`encode_paint` (zeros for ``None``)."""
    out = np.zeros(tuple(shape), np.uint8)
    if paint:
        window = slices_from_list(paint["window"])
        out[window][decode_mask(paint["add"])] = ADD
        out[window][decode_mask(paint["remove"])] = REMOVE
    return out


def review_record(mask_name: str, mask_hash: str, based_on: str, decisions: list[dict], paint: dict | None,
                  blocks_touched: list[int], escalations: list[dict]) -> dict:
    return {"type": REVIEW, "version": REVIEW_VERSION,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "mask": mask_name, "mask_hash": mask_hash, "based_on": based_on, "decisions": decisions,
            "paint": paint, "blocks_painted": blocks_touched, "escalations": escalations}


def last_review(records: Sequence[dict]) -> dict | None:
    """The newest ``review`` record of a trace (None if the run was never reviewed)."""
    found = [r for r in records if r.get("type") == REVIEW]
    return found[-1] if found else None
