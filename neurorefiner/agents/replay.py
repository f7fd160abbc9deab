"""Roles that repeat the decisions of a recorded trace (tests, debugging, re-running a VLM run exactly
without its server). The editor still runs; only the roles' answers come from the file. A decision the
trace does not hold (the inputs drifted) is an error that says which one."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from neurorefiner.agents.roles import (
    Advice,
    Attempt,
    BlockContext,
    CallInfo,
    Defect,
    Flag,
    GlobalView,
    Inspection,
    Step,
    UnreadableAdvice,
    Verdict,
)
from neurorefiner.agents.trace import read_trace


class ReplayMismatch(RuntimeError):
    """The replayed run asked for a decision the trace does not hold."""


@lru_cache(maxsize=4)
def _book(path: str) -> dict[tuple, dict]:
    book: dict[tuple, dict] = {}
    for r in read_trace(path, repair=False):
        if r.get("type") == "decision":
            book[(r["role"], r["round"], r.get("block"), r.get("defect"), r.get("attempt"))] = r
    if not book:
        raise ReplayMismatch(f"{path}: no decisions to replay")
    return book


class _Replay:
    def __init__(self, trace: str | Path) -> None:
        self.trace = str(trace)
        self.name = "replay"

    def _get(self, role: str, rnd: int, block: int | None = None, defect: int | None = None,
             attempt: int | None = None) -> dict:
        rec = _book(self.trace).get((role, rnd, block, defect, attempt))
        if rec is None:
            raise ReplayMismatch(f"{self.trace}: no {role} decision for round {rnd}, block {block}, defect {defect}, "
                                 f"try {attempt}")
        return rec

    def _info(self, rec: dict) -> CallInfo:
        return CallInfo(f"replay:{rec.get('backend')}", rec.get("prompt_id"), rec.get("raw"),
                        notes=[f"replayed from {Path(self.trace).name}"])


class ReplayInspector(_Replay):
    def inspect(self, view: GlobalView) -> Inspection:
        rec = self._get("inspector", view.round)
        flags = {int(f["block"]): Flag.from_dict(f) for f in rec["decision"]["flags"]}
        return Inspection(flags, self._info(rec))


class ReplayAdvisor(_Replay):
    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        rec = self._get("advisor", step.round, step.block, step.defect, step.attempt)
        if rec["decision"] is None:
            if rec.get("unreadable"):  # a recorded answer outside the grammar: the same failed try again
                raise UnreadableAdvice(str(rec["unreadable"]), self._info(rec))
            return None
        return Advice.from_dict(rec["decision"], self._info(rec))


class ReplayValidator(_Replay):
    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict:
        rec = self._get("validator", step.round, step.block, step.defect, step.attempt)
        d = rec["decision"]
        return Verdict(bool(d["accept"]), str(d["reason"]), self._info(rec), dict(d.get("checks", {})))
