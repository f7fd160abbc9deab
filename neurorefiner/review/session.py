"""A person's review of one refine run, without any GUI: decide on edits, paint, save.

The reviewed mask starts from the refined mask. An edit the agents accepted and the person rejects is
undone (the voxels it changed go back to their state before it); an edit the agents rejected and the
person accepts is applied (those voxels take its result); then the painted correction adds (label 1) and
removes (label 2) voxels. Edits are applied in the order the run made them. Saving writes the mask with
write-then-rename and appends one ``review`` record to ``trace.jsonl`` (see :mod:`.records`) while
holding the folder's lock, so it never interleaves with a refine run writing the same trace.

The saved mask is a normal input: ``python refine.py image=IMG mask=DIR/reviewed_mask.tif out=NEW``
refines on from the person's decisions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.agents.trace import TraceWriter, array_hash, read_trace
from neurorefiner.errors import InputError
from neurorefiner.io import write_volume
from neurorefiner.refine.output_lock import OutputLock
from neurorefiner.review.folder import REVIEWED, RunFolder
from neurorefiner.review.history import EditTry, Escalation, edit_tries, escalations
from neurorefiner.review.records import ADD, REMOVE, decode_paint, encode_paint, last_review, review_record

DECISIONS = ("accept", "reject")


class ReviewSession:
    """The state of one review: the run (``folder``), its tries and escalations, the person's decisions
    (edit id -> 'accept' | 'reject') and painted correction (ZYX uint8: 0 none, 1 add, 2 remove).
    ``resume`` starts from the decisions and paint of the folder's last saved review."""

    def __init__(self, folder: RunFolder, resume: bool = True) -> None:
        self.folder = folder
        self.tries: list[EditTry] = edit_tries(folder.records)
        self.by_id = {t.id: t for t in self.tries}
        self.escalations: list[Escalation] = escalations(folder.records, folder.blocks, self.tries)
        self.decisions: dict[str, str] = {}
        self.correction = np.zeros(folder.refined.shape, np.uint8)
        previous = last_review(folder.records) if resume else None
        if previous:
            self.decisions = {d["edit"]: d["person"] for d in previous.get("decisions", []) if d["edit"] in self.by_id}
            self.correction = decode_paint(previous.get("paint"), folder.refined.shape)

    # ------------------------------------------------------------------ decisions
    def decide(self, edit_id: str, decision: str | None) -> None:
        """Record the person's ``decision`` on an edit (None forgets it: the agents' verdict stands)."""
        if edit_id not in self.by_id:
            raise KeyError(f"no edit {edit_id!r} in this run (edits: {', '.join(list(self.by_id)[:5])} ...)")
        if decision is None:
            self.decisions.pop(edit_id, None)
            return
        if decision not in DECISIONS:
            raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
        self.decisions[edit_id] = decision

    def kept(self, edit: EditTry) -> bool:
        """Whether ``edit`` is in the reviewed mask: the person's decision, else the agents' verdict."""
        d = self.decisions.get(edit.id)
        return edit.accepted if d is None else d == "accept"

    def paint(self, correction: np.ndarray) -> None:
        """Take the painted correction (labels 1 = add, 2 = remove; other values are ignored)."""
        c = np.asarray(correction)
        if c.shape != self.correction.shape:
            raise ValueError(f"correction has shape {c.shape}, the volume {self.correction.shape}")
        self.correction = np.where((c == ADD) | (c == REMOVE), c, 0).astype(np.uint8)

    # ------------------------------------------------------------------ results
    def edits_layer(self, kept: bool = True) -> np.ndarray:
        """Labels (1 added, 2 removed) of the edits that are (``kept``) or are not in the reviewed mask."""
        out = np.zeros(self.correction.shape, np.uint8)
        for t in self.tries:
            if self.kept(t) != kept:
                continue
            view = out[t.window]
            view[t.after & ~t.before] = ADD
            view[t.before & ~t.after] = REMOVE
        return out

    def result(self) -> np.ndarray:
        """The reviewed mask (see the module docstring)."""
        mask = self.folder.refined.copy()
        for t in self.tries:
            keep = self.kept(t)
            if keep == t.accepted:
                continue
            changed = t.before != t.after
            view = mask[t.window]
            view[changed] = (t.after if keep else t.before)[changed]
        mask[self.correction == ADD] = True
        mask[self.correction == REMOVE] = False
        return mask

    def changed_decisions(self) -> list[dict]:
        return [{"edit": t.id, "round": t.round, "block": t.block, "defect": t.defect, "attempt": t.attempt,
                 "agents": "accept" if t.accepted else "reject", "person": self.decisions[t.id]}
                for t in self.tries if t.id in self.decisions]

    def save(self, name: str = REVIEWED) -> Path:
        """Write the reviewed mask into the run folder and append the ``review`` record; returns its path."""
        if Path(name).name != name or not name.endswith((".tif", ".tiff")):
            raise InputError("the reviewed mask is saved in the run folder as a .tif: give a file name", name)
        folder = self.folder
        mask = self.result()
        painted = self.correction.any(axis=0)
        blocks = sorted({b.id for b in folder.blocks if painted[b.slices[1], b.slices[2]].any()})
        escalations = [{"block": e.block, "key": e.key, "centre": [round(v, 1) for v in e.centre]}
                       for e in self.escalations]
        with OutputLock(folder.path, {"review": str(folder.path / name)}):
            read_trace(folder.trace_path, repair=True)   # a torn last line (a killed run) must not swallow ours
            path = write_volume(folder.path / name, mask, spacing=folder.spacing)
            record = review_record(name, array_hash(mask), array_hash(folder.refined), self.changed_decisions(),
                                   encode_paint(self.correction), blocks, escalations)
            with TraceWriter(folder.trace_path) as trace:
                trace.write(record)
        folder.records.append(record)
        return path
