"""Algorithm 1: inspect, advise, edit, validate, merge; round after round until nothing is flagged.

Per round the Inspector flags blocks; each flagged block's work (every defect: up to ``t_max``
advisor -> edit -> validate tries, stopping at the first accepted edit) is :func:`refine_block`, a pure
function of the block's region (image and mask of the block with a halo) and its flag, so blocks map
over threads here and could map over a cluster unchanged. All blocks of a round start from the same
mask; their accepted edits are merged afterwards in block order, each as the voxels it changed.
Defects that exhausted their tries are escalated (listed for a person) and not retried in later rounds
(a deterministic advisor would only repeat itself); set ``retry_failed`` to retry them. With
``retry_declined`` off, a defect whose edit the editor declined on the evidence (a bridge too dark, pieces the
image shows) is escalated at once: another frame would only be a search for a window that gets past the
editor's own judgement.

At most ``max_defects_per_round`` defects are worked on per round (every block's breaks before any
block's noise, each in the Inspector's order); the rest wait for the next round. A mask of 10,000 specks
therefore costs ``t_max`` capped rounds, not 10,000 edits.

When the soma (``root``) is known, no accepted edit may cut its piece away: an edit that deletes the voxel at
the soma, removes part of its piece as noise, or splits it is refused whatever the Validator said
(:mod:`neurorefiner.agents.soma_guard`; it holds in every Table 3 row, since the soma is an input, not a role).

Every decision goes to the trace as it is made; a run restarted on the same inputs and settings takes
finished rounds' inspections and finished blocks from the trace instead of recomputing them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np

from neurorefiner.agents.ablation import ROLE_SETS, Ablation, keep_everything
from neurorefiner.agents.editor import run_editor
from neurorefiner.agents.roles import (
    Advice,
    Advisor,
    Attempt,
    BlockContext,
    CallInfo,
    Defect,
    Editor,
    Flag,
    GlobalView,
    Inspection,
    Inspector,
    RoleError,
    Step,
    UnreadableAdvice,
    Validator,
    Verdict,
)
from neurorefiner.agents.soma_guard import SomaPiece
from neurorefiner.agents.trace import array_hash, decode_mask, encode_mask
from neurorefiner.topology.blocks import Block, Slices, expand, grid_blocks, slices_from_list, slices_to_list

INSPECTOR_INPUTS = ("global_mip", "block_mips", "betti0")
Emit = Callable[[dict], None]


class LoopSettingError(ValueError):
    """A :class:`LoopSettings` value out of range, said as ``<field>=<value> <problem>``; ``field`` names the setting
    (an entry point names it as its option: ``loop.halo=-2 ...``)."""

    def __init__(self, name: str, value: Any, problem: str) -> None:
        self.field = name
        super().__init__(f"{name}={value!r} {problem}")


def _whole(value: Any, least: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, Integral) and value >= least


@dataclass
class LoopSettings:
    """The loop's knobs (paper defaults: T_max = 5, 128 x 128 blocks); the one place of their defaults,
    spelled for Hydra in ``conf/loop/default.yaml`` (a test holds the two equal)."""

    t_max: int = 5
    block_size: int = 128
    block_depth: int | None = None
    editor_size: tuple[int, int, int] = (32, 64, 64)
    halo: int | None = None                # default: half the editor's largest side
    max_defects_per_round: int = 32
    roles: str = "full"                    # full | no_validator | no_advisor | inspector_only | none (Table 3)
    inspector_inputs: tuple[str, ...] = INSPECTOR_INPUTS   # Table 5
    concurrency: int = 1
    retry_failed: bool = False
    retry_declined: bool = True
    generic_instruction: str = "Repair break at center-center-center"

    def __post_init__(self) -> None:
        for name, least in (("t_max", 1), ("block_size", 1), ("block_depth", 1), ("halo", 0),
                            ("max_defects_per_round", 1), ("concurrency", 1)):
            value, optional = getattr(self, name), name in ("block_depth", "halo")
            if not (_whole(value, least) or (optional and value is None)):
                raise LoopSettingError(name, value, f"must be a whole number >= {least}"
                                                    + (" (or null)" if optional else ""))
        size = self.editor_size
        if (isinstance(size, (str, bytes)) or not isinstance(size, Sequence) or len(size) != 3
                or not all(_whole(v, 1) for v in size)):
            raise LoopSettingError("editor_size", size, "must be three whole numbers >= 1 (z, y, x)")
        if self.roles not in ROLE_SETS:
            raise LoopSettingError("roles", self.roles, f"must be one of {ROLE_SETS}")
        bad = set(self.inspector_inputs) - set(INSPECTOR_INPUTS)
        if bad or not self.inspector_inputs:
            raise LoopSettingError("inspector_inputs", list(self.inspector_inputs),
                                   f"must be a non-empty subset of {INSPECTOR_INPUTS}")
        self.editor_size = tuple(int(v) for v in size)  # type: ignore[assignment]
        self.inspector_inputs = tuple(self.inspector_inputs)
        if self.halo is None:
            self.halo = max(self.editor_size) // 2

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Agents:
    """The three roles the loop talks to (any implementations)."""

    inspector: Inspector
    advisor: Advisor
    validator: Validator


@dataclass
class Edit:
    """An accepted edit: its window in volume coordinates and the window's mask before and after."""

    window: Slices
    before: np.ndarray
    after: np.ndarray

    def as_dict(self) -> dict:
        return {"window": slices_to_list(self.window), "before": encode_mask(self.before),
                "after": encode_mask(self.after)}

    @classmethod
    def from_dict(cls, d: dict) -> Edit:
        return cls(slices_from_list(d["window"]), decode_mask(d["before"]), decode_mask(d["after"]))


@dataclass
class BlockOutcome:
    """What one block's work produced: accepted edits and one status per defect worked on."""

    block: int
    edits: list[Edit]
    statuses: list[dict]
    seconds: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"block": self.block, "edits": [e.as_dict() for e in self.edits], "statuses": self.statuses,
                "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict) -> BlockOutcome:
        return cls(int(d["block"]), [Edit.from_dict(e) for e in d["edits"]], list(d["statuses"]),
                   dict(d.get("seconds", {})))


@dataclass
class LoopResult:
    mask: np.ndarray
    rounds: list[dict]
    escalated: dict[int, list[dict]]
    seconds: dict
    converged: bool
    counts: dict


def _decision(step: Step | None, rnd: int, block: int | None, role: str, info: CallInfo, decision: Any,
              input_hash: str | None = None, **extra: Any) -> dict:
    rec = {"type": "decision", "round": rnd, "block": block, "role": role, "input_hash": input_hash,
           "defect": None if step is None else step.defect, "attempt": None if step is None else step.attempt,
           **info.as_dict(), "decision": decision}
    rec.update(extra)
    return rec


def _guarded(emit: Emit, step: Step | None, rnd: int, block: int | None, role: str, input_hash: str | None,
             call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)``; a role that cannot decide (:class:`RoleError`) first leaves what it asked and was
    answered in the trace (a ``failed_call`` record, which readers of decisions skip), then the error
    goes on to end the run in one line."""
    try:
        return call(*args)
    except RoleError as exc:
        if exc.info is not None:
            emit({"type": "failed_call", "round": rnd, "block": block, "role": role, "input_hash": input_hash,
                  "defect": None if step is None else step.defect,
                  "attempt": None if step is None else step.attempt, **exc.info.as_dict(), "error": str(exc)})
        raise


def _soma_kept(ctx: BlockContext, defect: Defect, advice: Advice, after: np.ndarray, verdict: Verdict) -> Verdict:
    """``verdict``, turned into a refusal when an accepted edit would cut the soma's piece away
    (:mod:`neurorefiner.agents.soma_guard`; only when the soma is known)."""
    if not verdict.accept or ctx.soma is None:
        return verdict
    why = ctx.soma.refusal(defect.kind, ctx.mask, advice.frame.window, after)
    if why is None:
        return verdict
    return Verdict(False, f"refused to keep the soma: {why}", verdict.info, {**verdict.checks, "soma": why})


def refine_block(ctx: BlockContext, flag: Flag, defects: list[tuple[int, Defect]], agents: Agents, editor: Editor,
                 t_max: int, validate: bool = True, emit: Emit | None = None, input_hash: str | None = None,
                 retry_declined: bool = True) -> BlockOutcome:
    """One block's work: each defect gets up to ``t_max`` advisor -> edit -> validate tries; accepted edits
    are applied to the region (``ctx.mask``) before the next defect. Without ``retry_declined`` the tries of
    a defect stop at the first edit the editor declined on the evidence. Pure apart from ``emit``."""
    emit = emit or (lambda rec: None)
    edits: list[Edit] = []
    statuses: list[dict] = []
    seconds = {"advisor": 0.0, "editor": 0.0, "validator": 0.0}
    for index, defect in defects:
        history: list[Attempt] = []
        status = {"defect": index, "key": defect.key, "kind": defect.kind, "status": "escalated",
                  "attempts": 0, "reason": ""}
        for k in range(t_max):
            step = Step(ctx.round, ctx.block.id, index, k)
            try:
                advice: Advice | None = _guarded(emit, step, ctx.round, ctx.block.id, "advisor", input_hash,
                                                 agents.advisor.advise, ctx, flag, defect, step, history)
            except UnreadableAdvice as exc:
                # an answer outside the grammar is a failed try: kept verbatim, counted, asked again with feedback
                seconds["advisor"] += exc.info.seconds
                emit(_decision(step, ctx.round, ctx.block.id, "advisor", exc.info, None, input_hash,
                               defect_kind=defect.kind, unreadable=exc.why))
                verdict = Verdict(False, f"the advisor's answer was not an instruction ({exc.why})", exc.info)
                history.append(Attempt(step, None, verdict))
                status["attempts"] = k + 1
                status["reason"] = verdict.reason
                continue
            info = advice.info if advice is not None else CallInfo(getattr(agents.advisor, "name", "advisor"))
            seconds["advisor"] += info.seconds
            emit(_decision(step, ctx.round, ctx.block.id, "advisor", info,
                           None if advice is None else advice.as_dict(), input_hash, defect_kind=defect.kind))
            if advice is None:
                status["reason"] = status["reason"] or "the advisor had no instruction to try"
                if k:
                    status["reason"] = f"{k} tries rejected; last: {status['reason']}"
                break
            before = ctx.mask[advice.frame.window].copy()
            t0 = time.perf_counter()
            after, why, declined = run_editor(editor, advice.frame, ctx.image, ctx.mask, advice.instruction)
            dt = time.perf_counter() - t0
            seconds["editor"] += dt
            added, removed = int((after & ~before).sum()), int((before & ~after).sum())
            emit(_decision(step, ctx.round, ctx.block.id, "editor", CallInfo("editor", seconds=dt, raw=why),
                           {"instruction": advice.instruction.format(), "added": added, "removed": removed,
                            "declined": declined},
                           input_hash, window=slices_to_list(tuple(
                               slice(s.start + o, s.stop + o) for s, o in zip(advice.frame.window, ctx.origin))),
                           before=encode_mask(before), after=encode_mask(after)))
            if validate:
                verdict = _guarded(emit, step, ctx.round, ctx.block.id, "validator", input_hash,
                                   agents.validator.validate, ctx, flag, defect, advice, before, after, step)
            else:
                verdict = keep_everything("kept without validation (ablation)")
            verdict = _soma_kept(ctx, defect, advice, after, verdict)
            seconds["validator"] += verdict.info.seconds
            emit(_decision(step, ctx.round, ctx.block.id, "validator", verdict.info, verdict.as_dict(), input_hash))
            history.append(Attempt(step, advice, verdict, added, removed))
            status["attempts"] = k + 1
            status["instruction"] = advice.instruction.format()
            status["reason"] = verdict.reason
            if verdict.accept:
                ctx.apply(advice.frame.window, after)
                window = tuple(slice(s.start + o, s.stop + o) for s, o in zip(advice.frame.window, ctx.origin))
                edits.append(Edit(window, before, after))  # type: ignore[arg-type]
                status["status"] = "fixed"
                break
            if declined and not retry_declined:
                status["reason"] = f"the editor declined it: {why}"
                break
        statuses.append(status)
    return BlockOutcome(ctx.block.id, edits, statuses, {k: round(v, 4) for k, v in seconds.items()})


def merge(mask: np.ndarray, outcomes: Iterable[BlockOutcome]) -> int:
    """Apply accepted edits in block order, each as the voxels it changed; returns voxels changed."""
    n = 0
    for o in sorted(outcomes, key=lambda o: o.block):
        for e in o.edits:
            changed = e.before != e.after
            view = mask[e.window]
            n += int((view[changed] != e.after[changed]).sum())
            view[changed] = e.after[changed]
    return n


class PriorRun:
    """Finished work found in an earlier trace of the same run (same inputs and settings)."""

    def __init__(self, records: list[dict]) -> None:
        self.inspections: dict[tuple[int, str], dict] = {}
        self.blocks: dict[tuple[int, int, str], dict] = {}
        for r in records:
            if r.get("type") == "decision" and r.get("role") == "inspector":
                self.inspections[(int(r["round"]), str(r["input_hash"]))] = r
            elif r.get("type") == "block_done":
                self.blocks[(int(r["round"]), int(r["block"]), str(r["input_hash"]))] = r

    def inspection(self, rnd: int, mask_hash: str) -> Inspection | None:
        r = self.inspections.get((rnd, mask_hash))
        if r is None:
            return None
        flags = {int(f["block"]): Flag.from_dict(f) for f in r["decision"]["flags"]}
        return Inspection(flags, CallInfo(r.get("backend", "trace"), r.get("prompt_id"), r.get("raw")))

    def block(self, rnd: int, block: int, input_hash: str) -> BlockOutcome | None:
        r = self.blocks.get((rnd, block, input_hash))
        return None if r is None else BlockOutcome.from_dict(r["outcome"])


def block_key(ctx: BlockContext, flag: Flag) -> str:
    """The hash of everything a block's work depends on: region image, region mask, flag."""
    return array_hash(ctx.image, ctx.mask) + ":" + array_hash(
        np.frombuffer(repr(flag.as_dict()).encode(), dtype=np.uint8))


def _select(inspection: Inspection, given_up: set[str], cap: int | None) -> tuple[dict[int, list], int]:
    """Defects to work on this round, at most ``cap``, and how many wait: every block's breaks before any
    block's noise (a break costs a neurite's length, a speck a few voxels), each kind in the Inspector's
    order. Taking whole blocks in turn instead let one block of a hundred specks fill the cap round
    after round while breaks in the next block waited."""
    chosen: dict[int, list[tuple[int, Defect]]] = {}
    ranked: list[tuple[int, int, int, int, Defect]] = []
    for order, (bid, flag) in enumerate(inspection.flags.items()):
        ds = list(flag.defects) or [Defect(flag.kind)]
        for i, d in enumerate(ds):
            if d.anchors and d.key in given_up:
                continue
            ranked.append((0 if d.kind == "FN" else 1, order, i, bid, d))
    ranked.sort(key=lambda t: t[:3])
    taken = ranked if cap is None else ranked[:cap]
    for _, _, i, bid, d in taken:
        chosen.setdefault(bid, []).append((i, d))
    chosen = {bid: sorted(v, key=lambda t: t[0]) for bid, v in chosen.items()}
    return chosen, len(ranked) - len(taken)


@dataclass
class _Tally:
    """What the rounds add up to: seconds per role, counts, escalated defects per block, defects given up."""

    seconds: dict = field(default_factory=lambda: {"inspector": 0.0, "advisor": 0.0, "editor": 0.0, "validator": 0.0})
    counts: dict = field(default_factory=lambda: {"accepted": 0, "rejected": 0, "escalated": 0, "reused_blocks": 0})
    escalated: dict[int, list[dict]] = field(default_factory=dict)
    given_up: set[str] = field(default_factory=set)

    def add(self, t: int, outcomes: list[BlockOutcome]) -> None:
        """One round's block outcomes: a fixed defect leaves the escalations, an unfixed one is given up and
        escalated (once, with the round it was last tried in)."""
        for o in outcomes:
            if o.seconds.get("reused"):
                self.counts["reused_blocks"] += 1
            for role in ("advisor", "editor", "validator"):
                self.seconds[role] += float(o.seconds.get(role, 0.0))
            for st in o.statuses:
                self.counts["rejected"] += max(0, st["attempts"] - (st["status"] == "fixed"))
                others = [e for e in self.escalated.get(o.block, []) if e["key"] != st["key"]]
                if st["status"] == "fixed":
                    self.counts["accepted"] += 1
                    self.escalated[o.block] = others
                else:
                    self.given_up.add(st["key"])
                    self.escalated[o.block] = others + [{**st, "round": t}]
        self.escalated = {b: v for b, v in self.escalated.items() if v}

    def result(self, mask: np.ndarray, rounds: list[dict], converged: bool) -> LoopResult:
        self.counts["escalated"] = sum(len(v) for v in self.escalated.values())
        return LoopResult(mask, rounds, self.escalated, {k: round(v, 3) for k, v in self.seconds.items()}, converged,
                          self.counts)


def _inspect(t: int, view: GlobalView, inspector: Inspector, ablation: Ablation, editor_size: tuple[int, ...],
             prior: PriorRun, emit: Emit, tally: _Tally) -> Inspection:
    """Round ``t``'s inspection: taken from the earlier trace when it holds this round of this mask, else asked
    of the Inspector (or every block, for the no-agents row) and recorded."""
    mask_hash = array_hash(view.mask)
    inspection = prior.inspection(t, mask_hash)
    if inspection is not None:
        return inspection
    if ablation.inspects:
        inspection = _guarded(emit, None, t, None, "inspector", mask_hash, inspector.inspect, view)
    else:
        inspection = ablation.every_block(view.blocks, editor_size)
    tally.seconds["inspector"] += inspection.info.seconds
    emit(_decision(None, t, None, "inspector", inspection.info, inspection.as_dict(), mask_hash))
    return inspection


def _work_round(t: int, image: np.ndarray, current: np.ndarray, blocks: list[Block], inspection: Inspection,
                chosen: dict[int, list], agents: Agents, editor: Editor, s: LoopSettings, validate: bool,
                spacing: tuple[float, float, float], prior: PriorRun, emit: Emit, progress: bool,
                root: tuple[float, float, float] | None = None) -> list[BlockOutcome]:
    """Every chosen block's work on the round's mask (``current`` is read, never written), in threads when
    ``concurrency`` > 1; a block whose inputs match a finished block of the earlier trace is taken from it.
    With ``root`` (the soma) no edit may cut the soma's piece away (:mod:`neurorefiner.agents.soma_guard`)."""
    from tqdm import tqdm

    by_id = {b.id: b for b in blocks}
    soma = SomaPiece.of(current, root, spacing)

    def work(bid: int) -> BlockOutcome:
        block = by_id[bid]
        region = expand(block.slices, (s.halo if s.block_depth else 0, s.halo, s.halo), current.shape)
        ctx = BlockContext(t, block, region, image[region], current[region].copy(), s.editor_size, spacing,
                           None if soma is None else soma.in_region(region))
        flag = inspection.flags[bid]
        key = block_key(ctx, flag)
        done = prior.block(t, bid, key)
        if done is not None:
            done.seconds = {**done.seconds, "reused": True}
            return done
        out = refine_block(ctx, flag, chosen[bid], agents, editor, s.t_max, validate, emit, key, s.retry_declined)
        emit({"type": "block_done", "round": t, "block": bid, "input_hash": key, "outcome": out.as_dict()})
        return out

    ids = sorted(chosen)
    bar = tqdm(total=len(ids), desc=f"round {t + 1}/{s.t_max}", unit="block", disable=not progress, leave=False)
    outcomes: list[BlockOutcome] = []
    if s.concurrency > 1 and len(ids) > 1:
        with ThreadPoolExecutor(max_workers=s.concurrency) as pool:
            for o in pool.map(work, ids):
                outcomes.append(o)
                bar.update()
    else:
        for bid in ids:
            outcomes.append(work(bid))
            bar.update()
    bar.close()
    return outcomes


def run_loop(image: np.ndarray, mask: np.ndarray, agents: Agents, editor: Editor, settings: LoopSettings,
             spacing: tuple[float, float, float] = (1.0, 1.0, 1.0), emit: Emit | None = None,
             prior: PriorRun | None = None, progress: bool = False,
             root: tuple[float, float, float] | None = None) -> LoopResult:
    """Refine ``mask`` (ZYX bool) against ``image`` (ZYX float32 in [0, 1]); see the module docstring. ``root``
    (ZYX voxels, the soma) tells the Inspector which piece is the tree to grow, and keeps that piece from being
    cut away. What the Table 3 rows switch off is :class:`~neurorefiner.agents.ablation.Ablation`'s business,
    not this function's."""
    emit = emit or (lambda rec: None)
    prior = prior or PriorRun([])
    s = settings
    ablation = Ablation(s.roles, s.generic_instruction)
    current = np.asarray(mask, dtype=bool).copy()
    image = np.asarray(image, dtype=np.float32)
    blocks = grid_blocks(current.shape, s.block_size, s.block_depth)
    run_agents = Agents(agents.inspector, ablation.advisor(agents.advisor), agents.validator)
    tally = _Tally()
    rounds: list[dict] = []
    converged = False
    for t in range(s.t_max):
        view = GlobalView(t, image, current, blocks, spacing, s.inspector_inputs, root)
        inspection = _inspect(t, view, agents.inspector, ablation, s.editor_size, prior, emit, tally)
        chosen, waiting = _select(inspection, set() if s.retry_failed else tally.given_up,
                                  s.max_defects_per_round if ablation.capped else None)
        if not chosen:
            converged = True
            rounds.append({"round": t, "flagged": 0, "changed": 0, "waiting": waiting})
            emit({"type": "round_done", "round": t, "flagged": 0, "converged": True, "mask_hash": array_hash(current)})
            break
        outcomes = _work_round(t, image, current, blocks, inspection, chosen, run_agents, editor, s,
                               ablation.validates, spacing, prior, emit, progress, root)
        changed = merge(current, outcomes)
        tally.add(t, outcomes)
        summary = {"round": t, "flagged": len(chosen), "defects": sum(len(v) for v in chosen.values()),
                   "waiting": waiting, "changed": changed,
                   "fixed": sum(st["status"] == "fixed" for o in outcomes for st in o.statuses)}
        rounds.append(summary)
        emit({"type": "round_done", **summary, "mask_hash": array_hash(current)})
        if ablation.stops_when_unchanged and changed == 0:
            break
    return tally.result(current, rounds, converged)
