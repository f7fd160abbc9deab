"""Stand-ins for the roles an ablation switches off (the paper's Table 3).

* ``none`` (no agents): every block is edited every round with one generic instruction, tile by tile
  at the editor's size, and every edit is kept.
* ``inspector_only``: the Inspector also writes the instruction, from what it sees (the xy MIP, no
  depth): the operation from the error type, the place from the defect's xy with depth "center".
* ``no_validator``: Inspector and Advisor as configured; every edit is kept.
* ``no_advisor``: the Inspector writes the instruction (as for ``inspector_only``) and the Validator checks
  each edit (the Table 3 row "Inspector + Validator").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.agents.editor import frame_around
from neurorefiner.agents.roles import (
    Advice,
    Advisor,
    Attempt,
    BlockContext,
    CallInfo,
    Defect,
    Flag,
    Inspection,
    Step,
    Verdict,
)
from neurorefiner.topology.blocks import Block
from neurorefiner.topology.instructions import Instruction, parse_instruction
from neurorefiner.topology.positions import Position, cell_index

ROLE_SETS = ("full", "no_validator", "no_advisor", "inspector_only", "none")


def tiles(block_slices: Sequence[slice], editor_size: Sequence[int]) -> list[tuple[int, int, int]]:
    """Centres (volume coordinates) of editor-sized tiles covering a block (the last ones overlap)."""
    axes = [[min(st + int(n) // 2, s.stop - 1) for st in range(s.start, s.stop, int(n))]
            for s, n in zip(block_slices, editor_size)]
    return [(z, y, x) for z in axes[0] for y in axes[1] for x in axes[2]]


class GenericAdvisor:
    """Always the same instruction, in a frame centred on the tile the defect names."""

    name = "generic"

    def __init__(self, instruction: str = "Repair break at center-center-center") -> None:
        self.instruction = parse_instruction(instruction)

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        if history:
            return None
        centre = np.asarray(defect.anchors[0], dtype=float) - ctx.origin
        frame = frame_around(centre, ctx.editor_size, ctx.mask.shape)
        return Advice(self.instruction, frame, CallInfo(self.name, raw=self.instruction.format()), "no agents")


class InspectorOnlyAdvisor:
    """The instruction the Inspector could write alone: op from the type, place from xy only."""

    name = "inspector_only"

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        if history:
            return None
        if defect.anchors:
            xy = np.asarray(defect.anchors, dtype=float).mean(axis=0) - ctx.origin
        else:
            b = ctx.block_in_region
            xy = np.array([0.0, (b[1].start + b[1].stop) / 2, (b[2].start + b[2].stop) / 2])
        centre = np.array([ctx.mask.shape[0] / 2.0, xy[1], xy[2]])
        frame = frame_around(centre, ctx.editor_size, ctx.mask.shape)
        f = np.clip(frame.to_frame(np.array([[frame.shape[0] / 2 + frame.window[0].start, xy[1], xy[2]]])), 0,
                    np.array(frame.shape) - 1)
        _, iy, ix = (int(v) for v in cell_index(f, frame.shape)[0])
        where = Position.from_cell((1, iy, ix))
        ins = Instruction("repair", where) if flag.kind == "FN" else Instruction("remove", where)
        return Advice(ins, frame, CallInfo(self.name, raw=ins.format()), "inspector only")


def keep_everything(reason: str) -> Verdict:
    return Verdict(True, reason, CallInfo("none"))


@dataclass(frozen=True)
class Ablation:
    """What one ``roles`` value (Table 3) changes in the loop, in one place, so the loop itself reads the same
    for every row: who writes the instruction (:meth:`advisor`), whether the Validator is asked
    (:attr:`validates`), whether the Inspector is asked or every block is flagged (:attr:`inspects`,
    :meth:`every_block`), whether the per-round cap applies and whether a round that changed nothing ends
    the run (the no-agents row has no Inspector to say it converged)."""

    roles: str = "full"
    generic_instruction: str = "Repair break at center-center-center"

    def __post_init__(self) -> None:
        if self.roles not in ROLE_SETS:
            raise ValueError(f"roles must be one of {ROLE_SETS}, got {self.roles!r}")

    @property
    def inspects(self) -> bool:
        return self.roles != "none"

    @property
    def validates(self) -> bool:
        return self.roles in ("full", "no_advisor")

    @property
    def capped(self) -> bool:
        return self.roles != "none"

    @property
    def stops_when_unchanged(self) -> bool:
        return self.roles == "none"

    def advisor(self, configured: Advisor) -> Advisor:
        """The configured Advisor, or the stand-in this row puts in its place."""
        if self.roles == "none":
            return GenericAdvisor(self.generic_instruction)
        if self.roles in ("inspector_only", "no_advisor"):
            return InspectorOnlyAdvisor()
        return configured

    def every_block(self, blocks: Sequence[Block], editor_size: Sequence[int]) -> Inspection:
        """The no-agents row's inspection: every block flagged, one defect per editor-sized tile."""
        flags = {}
        for b in blocks:
            ds = tuple(Defect("FN", (c,), 0, "every block, no agents") for c in tiles(b.slices, editor_size))
            flags[b.id] = Flag(b.id, "FN", ds, "no agents: every block")
        return Inspection(flags, CallInfo("none"))
