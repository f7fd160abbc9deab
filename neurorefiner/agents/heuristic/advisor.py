"""The heuristic Refinement Advisor: one instruction of the grammar per defect, its place read from
where the defect lies in the editor's frame.

A break becomes ``Connect neuron from <end a> to <end b>`` (ends in different cells) or ``Repair break
at <cell>`` (both in one cell); a noise piece ``Remove isolated noise at <cell>`` or, when it spans
cells, ``Remove noise from <cell> to <cell>``. A rejected try is followed by the other form, then by
the first form in a frame moved a quarter along the defect; after that there is nothing new to say
and the advisor gives up (the loop escalates), since a deterministic advisor repeating itself only
repeats the editor's answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.editor import frame_around, frame_position
from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects
from neurorefiner.agents.roles import Advice, Attempt, BlockContext, CallInfo, Defect, EditFrame, Flag, Step
from neurorefiner.topology.components import component_voxels
from neurorefiner.topology.instructions import Instruction
from neurorefiner.topology.positions import cell_index


def _cell(points: np.ndarray, frame: EditFrame) -> tuple[int, int, int]:
    inside = np.clip(frame.to_frame(points), 0, np.array(frame.shape) - 1)
    return tuple(int(v) for v in cell_index(inside, frame.shape)[0])  # type: ignore[return-value]


class HeuristicAdvisor:
    """Deterministic Advisor; needs no image beyond what the detector used."""

    name = "heuristic"

    def __init__(self, step_back: float = 6.0, detect: DetectSettings | None = None) -> None:
        self.step_back = float(step_back)
        self.detect = detect or DetectSettings()

    # --- what to fix
    def _find(self, ctx: BlockContext, kind: str) -> Defect | None:
        """A defect of ``kind`` in the block when the Inspector named only the block (a VLM does)."""
        found = find_defects(ctx.mask, ctx.image, ctx.spacing, self.detect, labels=ctx.components()[0])
        b = ctx.block_in_region
        for d in found:
            mid = np.asarray(d.anchors, dtype=float).mean(axis=0)
            if d.kind == kind and b[1].start <= mid[1] < b[1].stop and b[2].start <= mid[2] < b[2].stop:
                return Defect(d.kind, tuple(tuple(int(v) for v in np.asarray(a) + ctx.origin) for a in d.anchors),
                              d.size, d.note)
        return None

    # --- what to say
    def _break_candidates(self, ctx: BlockContext, a: np.ndarray, b: np.ndarray) -> list[tuple[Instruction, EditFrame]]:
        shape = ctx.mask.shape
        mid = (a + b) / 2.0
        out = []
        for centre in (mid, mid + (a - mid) * 0.5):
            frame = frame_around(centre, ctx.editor_size, shape)
            ca, cb = _cell(a[None], frame), _cell(b[None], frame)
            direction = (b - a) / max(np.linalg.norm(b - a), 1e-6)
            connect = None
            if ca != cb:
                connect = Instruction("connect", frame_position(a[None], frame), frame_position(b[None], frame))
            else:  # both ends in one cell: step back along the fibre to name two cells
                a2, b2 = a - direction * self.step_back, b + direction * self.step_back
                if _cell(a2[None], frame) != _cell(b2[None], frame):
                    connect = Instruction("connect", frame_position(a2[None], frame), frame_position(b2[None], frame))
            repair = Instruction("repair", frame_position(np.rint(mid)[None], frame))
            first, second = (connect, repair) if ca != cb else (repair, connect)
            for ins in (first, second) if centre is mid else (first,):
                if ins is not None:
                    out.append((ins, frame))
        return out

    def _noise_candidates(self, ctx: BlockContext, anchor: np.ndarray) -> list[tuple[Instruction, EditFrame]]:
        z, y, x = (int(v) for v in np.clip(anchor, 0, np.array(ctx.mask.shape) - 1))
        if not ctx.mask[z, y, x]:
            return []  # already gone (an earlier edit took it)
        labels, _, sizes = ctx.components()
        voxels = component_voxels(labels, sizes, (z, y, x))
        centre = voxels.mean(axis=0)
        out = []
        for c in (centre, centre + np.array([0, 8, 8])):
            frame = frame_around(c, ctx.editor_size, ctx.mask.shape)
            single = Instruction("remove", frame_position(voxels, frame))
            span = None
            if len(voxels) >= 3:
                axis = np.linalg.svd(voxels - centre, full_matrices=False)[2][0]
                proj = (voxels - centre) @ axis
                p0, p1 = voxels[int(np.argmin(proj))], voxels[int(np.argmax(proj))]
                if _cell(p0[None], frame) != _cell(p1[None], frame):
                    span = Instruction("remove", frame_position(p0[None], frame), frame_position(p1[None], frame))
            for ins in (single, span) if c is centre else (single,):
                if ins is not None:
                    out.append((ins, frame))
        return out

    def candidates(self, ctx: BlockContext, defect: Defect) -> list[tuple[Instruction, EditFrame]]:
        """Every (instruction, frame) this Advisor would try for ``defect``, in order (subclasses word and place
        them their own way; ``advise`` is shared)."""
        anchors = np.asarray(defect.anchors, dtype=float) - ctx.origin
        if defect.kind == "FN" and len(anchors) >= 2:
            return self._break_candidates(ctx, anchors[0], anchors[1])
        return self._noise_candidates(ctx, anchors[0])

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        """The first of ``candidates`` not tried before for this defect; ``None`` when all were (escalate)."""
        t0 = time.perf_counter()
        if not defect.anchors:
            found = self._find(ctx, defect.kind)
            if found is None:
                return None
            defect = found
        tried = {(h.advice.instruction.format(), repr(h.advice.frame.as_dict()))
                 for h in history if h.advice is not None}
        fresh = [c for c in self.candidates(ctx, defect) if (c[0].format(), repr(c[1].as_dict())) not in tried]
        if not fresh:
            return None
        ins, frame = fresh[0]
        info = CallInfo(self.name, seconds=time.perf_counter() - t0, raw=ins.format())
        return Advice(ins, frame, info, reason=defect.note)
