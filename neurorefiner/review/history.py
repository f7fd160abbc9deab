"""What the agents did, read back from the trace: every edit they tried, and the defects they escalated.

An edit try is one editor call (round, block, defect, try) with its window masks before and after, the
instruction, and the Validator's verdict. The escalated defects are rebuilt from the ``block_done``
records the way the loop builds them (a defect fixed in a later round leaves the list), so the list is the
run's own, also for a run that was resumed (later records of the same block and round win).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from neurorefiner.agents.trace import decode_mask
from neurorefiner.refine.report import latest_decisions
from neurorefiner.refine.report_marks import in_block_terms, locate
from neurorefiner.topology.blocks import Block, Slices, slices_from_list


@dataclass
class EditTry:
    """One editor call. ``window`` is in volume voxels (ZYX); ``before``/``after`` are the window's mask."""

    round: int
    block: int
    defect: int
    attempt: int
    instruction: str
    window: Slices
    before: np.ndarray
    after: np.ndarray
    accepted: bool
    reason: str = ""
    advice: str = ""

    @property
    def id(self) -> str:
        """Stable name, 1-based as the report writes them: ``r1-b3-d0-t2`` = the agent loop's first iteration
        (Algorithm 1), block 3, defect 0, try 2."""
        return f"r{self.round + 1}-b{self.block}-d{self.defect}-t{self.attempt + 1}"

    @property
    def key(self) -> tuple[int, int, int, int]:
        return self.round, self.block, self.defect, self.attempt

    @property
    def added(self) -> int:
        return int((self.after & ~self.before).sum())

    @property
    def removed(self) -> int:
        return int((self.before & ~self.after).sum())

    @property
    def centre(self) -> tuple[float, float, float]:
        return tuple((s.start + s.stop - 1) / 2.0 for s in self.window)  # type: ignore[return-value]


@dataclass
class Escalation:
    """A defect the agents gave up on: where it is (``centre`` ZYX voxels and what that comes from), why,
    and every try at it (``tries``), plus the advisor's empty answers (``notes``)."""

    block: int
    defect: int
    round: int
    kind: str
    key: str
    reason: str
    instruction: str
    centre: tuple[float, float, float]
    located_by: str
    tries: list[EditTry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def label(self) -> str:
        z, y, x = (int(round(v)) for v in self.centre)
        return f"block {self.block}: {self.kind} at z {z}, y {y}, x {x} ({len(self.tries)} tries) - {self.reason}"


def edit_tries(records: Sequence[dict]) -> list[EditTry]:
    """Every edit try of the run, in (round, block, defect, try) order."""
    decisions = latest_decisions(records)
    key = lambda r: (r["round"], r["block"], r["defect"], r["attempt"])  # noqa: E731
    verdicts = {key(r): r for r in decisions if r["role"] == "validator"}
    advice = {key(r): r for r in decisions if r["role"] == "advisor"}
    tries = []
    for r in decisions:
        if r["role"] != "editor" or "window" not in r:
            continue
        k = key(r)
        v = (verdicts.get(k) or {}).get("decision") or {}
        a = (advice.get(k) or {}).get("decision") or {}
        tries.append(EditTry(int(r["round"]), int(r["block"]), int(r["defect"]), int(r["attempt"]),
                             str(r["decision"]["instruction"]), slices_from_list(r["window"]),
                             decode_mask(r["before"]), decode_mask(r["after"]), bool(v.get("accept", False)),
                             str(v.get("reason", "no verdict")), str(a.get("reason", ""))))
    return sorted(tries, key=lambda t: t.key)


def _final_escalations(records: Sequence[dict]) -> list[tuple[int, dict]]:
    """(block, status) of each defect escalated at the end of the run, as ``agents.loop.run_loop`` keeps them."""
    done: dict[tuple[int, int], dict] = {}
    for r in records:
        if r.get("type") == "block_done":
            done[(int(r["round"]), int(r["block"]))] = r
    escalated: dict[int, list[dict]] = {}
    for (rnd, block), r in sorted(done.items()):
        for st in r["outcome"].get("statuses", []):
            kept = [e for e in escalated.get(block, []) if e["key"] != st["key"]]
            escalated[block] = kept if st["status"] == "fixed" else kept + [{**st, "round": rnd}]
    return [(b, st) for b in sorted(escalated) for st in escalated[b]]


def escalations(records: Sequence[dict], blocks: Sequence[Block], tries: Sequence[EditTry]) -> list[Escalation]:
    """The escalated defects with their tries. A defect the Inspector located has anchors (its ends or a
    voxel of the piece): its centre is theirs. A VLM Inspector names only the block, so the centre is that
    of the windows the editor tried, else the block's own centre; ``located_by`` says which."""
    by_id = {b.id: b for b in blocks}
    notes: dict[tuple, list[str]] = {}
    for r in latest_decisions(records):
        if r["role"] == "advisor" and r.get("decision") is None:
            why = (f"the advisor's answer was not an instruction ({r['unreadable']})" if r.get("unreadable")
                   else "the advisor had no instruction to try")
            notes.setdefault((r["round"], r["block"], r["defect"]), []).append(f"try {int(r['attempt']) + 1}: {why}")
    out = []
    for block, st in _final_escalations(records):
        mine = [t for t in tries if (t.round, t.block, t.defect) == (st["round"], block, st["defect"])]
        centre, how = locate(st["key"], [t.window for t in mine], by_id.get(block))
        out.append(Escalation(block, int(st["defect"]), int(st["round"]), str(st["kind"]), str(st["key"]),
                              str(st.get("reason", "")), str(st.get("instruction", "")), centre, how, mine,  # type: ignore[arg-type]
                              notes.get((st["round"], block, st["defect"]), [])))
    return out


def describe_try(t: EditTry, blocks: Sequence[Block]) -> str:
    """One line per try for a person: the instruction placed in its block, the change and the verdict."""
    by_id = {b.id: b for b in blocks}
    where = in_block_terms(t.window, by_id[t.block]) if t.block in by_id else f"window {t.window}"
    verdict = "ACCEPT" if t.accepted else "REJECT"
    return (f"try {t.attempt + 1} ({t.id}): {t.instruction}, {where}; +{t.added} / -{t.removed} voxels; "
            f"{verdict}: {t.reason}")
