"""The learned Refinement Advisor: the paper's grammar for every candidate the judge passed, its places read
from where the edit lies in the editor's frame.

A crop centred on each candidate would make every sentence ``Repair break at center-center-center``: the text
path of TopoRefineNet (its fusion blocks and the text encoder) would learn nothing at use. So the frame is
placed the way the editor's training crops hold their defects (:func:`neurorefiner.defects.describe.crop_start`:
the edit's centre anywhere at least a quarter of the frame from its border), with a draw seeded by the
defect's place in the volume (the same place, the same frame: runs resume and replay identically), and the
sentence is written by the writer that describes the training defects, on the voxels the edit would change:

* a join (``FN``): the straight gap between its two facing ends -> ``Connect neuron from <end> to <end>``
  for a long gap whose ends fall in two cells, else ``Repair break at <cell>``;
* a removal (``FP``): the piece's voxels (or a block's group of pieces,
  :mod:`neurorefiner.agents.learned.noise_groups`) -> ``Remove isolated noise at <cell>`` or, for a long piece
  or a group across cells, ``Remove noise from <cell> to <cell>``;
* an attached branch (``FP_ATTACHED``): ``Remove noise from <tip> to <junction>``, in a frame where the two
  fall in different cells (the stage-1 ``touch`` defects' form).

A rejected try is followed by the next frame drawn for the same defect (a different crop, so a different
sentence and a different view for the network); after ``frames`` draws there is nothing new to say and the
Advisor gives up (the loop escalates).

``placement="centred"`` keeps the Advisor as it was before: frames centred on each edit, the heuristic Advisor's
wording (nearly every break then reads ``Repair break at center-center-center``); a comparison row, not a
default.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.editor import frame_around, frame_position
from neurorefiner.agents.heuristic.advisor import HeuristicAdvisor
from neurorefiner.agents.heuristic.detect import DetectSettings
from neurorefiner.agents.roles import BlockContext, Defect, EditFrame
from neurorefiner.defects.describe import (
    crop_start,
    describe_branch,
    describe_join,
    describe_piece,
    describe_pieces,
)
from neurorefiner.topology.components import component_voxels
from neurorefiner.topology.instructions import Instruction

ATTACHED = "FP_ATTACHED"
_KIND_CODE = {"FN": 1, "FP": 2, ATTACHED: 3}


def frame_at(start: Sequence[int], size: Sequence[int], region_shape: Sequence[int]) -> EditFrame:
    """The editor frame of ``size`` starting at ``start`` (region coordinates), moved inside the region."""
    centre = [int(s) + int(n) / 2.0 for s, n in zip(start, size, strict=True)]
    return frame_around(centre, size, region_shape)


def placed_frames(centre: np.ndarray, size: Sequence[int], region_shape: Sequence[int], key: Sequence[int],
                  n: int, seed: int = 0) -> list[EditFrame]:
    """``n`` distinct frames holding ``centre`` (region coordinates) as a training crop holds its defect,
    drawn from a generator seeded by ``key`` (the defect's kind and place in the volume)."""
    rng = np.random.default_rng([int(seed), *(int(k) & 0x7FFFFFFF for k in key)])
    out: list[EditFrame] = []
    for _ in range(4 * n):
        frame = frame_at(crop_start(centre, size, region_shape, rng), size, region_shape)
        if all(frame != f for f in out):
            out.append(frame)
        if len(out) == n:
            break
    return out


class LearnedAdvisor(HeuristicAdvisor):
    """One instruction of the grammar per judged candidate, in a frame placed as the editor's training crops
    are (module docstring). ``frames``: frames drawn per defect (tries before giving up); ``seed``: the draw's
    seed (the same for a run and its resume); ``placement``: ``training`` (default) or ``centred`` (the frames
    centred on each edit, as before; for comparison)."""

    name = "learned"

    def __init__(self, step_back: float = 6.0, detect: DetectSettings | None = None, frames: int = 3,
                 seed: int = 0, placement: str = "training") -> None:
        super().__init__(step_back, detect)
        if frames < 1:
            raise ValueError(f"frames must be >= 1, got {frames}")
        if placement not in ("training", "centred"):
            raise ValueError(f"placement must be 'training' or 'centred', got {placement!r}")
        self.frames, self.seed, self.placement = int(frames), int(seed), placement

    def _key(self, defect: Defect) -> list[int]:
        return [_KIND_CODE.get(defect.kind, 0), *(int(v) for a in defect.anchors for v in a)]

    def _frames(self, ctx: BlockContext, centre: np.ndarray, defect: Defect) -> list[EditFrame]:
        return placed_frames(centre, ctx.editor_size, ctx.mask.shape, self._key(defect), self.frames, self.seed)

    def _centred(self, ctx: BlockContext, defect: Defect, anchors: np.ndarray) -> list[tuple[Instruction, EditFrame]]:
        """The frames and wording before the frames were placed as training crops are (``placement="centred"``)."""
        if defect.kind == "FN" and len(anchors) >= 2:
            return self._break_candidates(ctx, anchors[0], anchors[1])
        if defect.kind == ATTACHED and len(anchors) >= 2:
            out = []
            tip, junction = anchors[0], anchors[1]
            for centre in ((tip + junction) / 2.0, junction + (tip - junction) * 0.25):
                frame = frame_around(centre, ctx.editor_size, ctx.mask.shape)
                a, b = frame_position(tip[None], frame), frame_position(junction[None], frame)
                out.append((Instruction("remove", a, b) if a != b else Instruction("remove", a), frame))
            return out
        return self._noise_candidates(ctx, anchors[0])

    @staticmethod
    def _pieces(ctx: BlockContext, anchors: np.ndarray) -> np.ndarray | None:
        """The voxels of every piece an anchor still lies on (a grouped removal names several), or None."""
        labels, _, sizes = ctx.components()
        parts, seen = [], set()
        for a in anchors:
            z, y, x = (int(v) for v in np.clip(np.rint(a), 0, np.array(ctx.mask.shape) - 1))
            if ctx.mask[z, y, x] and int(labels[z, y, x]) not in seen:
                seen.add(int(labels[z, y, x]))
                parts.append(component_voxels(labels, sizes, (z, y, x)))
        return np.concatenate(parts) if parts else None

    def candidates(self, ctx: BlockContext, defect: Defect) -> list[tuple[Instruction, EditFrame]]:
        """Every (instruction, frame) this Advisor would try for ``defect``, in order."""
        anchors = np.asarray(defect.anchors, dtype=float).reshape(-1, 3) - ctx.origin
        if self.placement == "centred":
            return self._centred(ctx, defect, anchors)
        out: list[tuple[Instruction, EditFrame]] = []
        if defect.kind == "FN" and len(anchors) >= 2:
            a, b = anchors[0], anchors[1]
            for frame in self._frames(ctx, (a + b) / 2.0, defect):
                out.append((describe_join(frame.to_frame(a[None])[0], frame.to_frame(b[None])[0], frame.shape),
                            frame))
        elif defect.kind == ATTACHED and len(anchors) >= 2:
            tip, junction = anchors[0], anchors[1]
            frames = self._frames(ctx, (tip + junction) / 2.0, defect)
            frames += placed_frames(junction + (tip - junction) * 0.25, ctx.editor_size, ctx.mask.shape,
                                    [*self._key(defect), 1], self.frames, self.seed)
            for frame in frames:
                ins = describe_branch(frame.to_frame(tip[None])[0], frame.to_frame(junction[None])[0], frame.shape)
                if ins is not None:
                    out.append((ins, frame))
        elif len(anchors) >= 1:
            voxels = self._pieces(ctx, anchors)
            if voxels is None:
                return []  # already gone (an earlier edit took them)
            # one piece: its mean; a group: its box's centre, which every frame holds the group around
            centre = voxels.mean(axis=0) if len(anchors) == 1 else (voxels.min(axis=0) + voxels.max(axis=0)) / 2.0
            describe = describe_piece if len(anchors) == 1 else describe_pieces
            for frame in self._frames(ctx, centre, defect):
                out.append((describe(frame.to_frame(voxels), frame.shape), frame))
        seen: set[tuple[str, str]] = set()
        unique = []
        for ins, frame in out:
            k = (ins.format(), repr(frame.as_dict()))
            if k not in seen:
                seen.add(k)
                unique.append((ins, frame))
        return unique

