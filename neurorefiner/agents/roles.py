"""The three roles of the loop as interfaces, and the values they pass to each other.

The loop (Algorithm 1) only knows these Protocols; which implementation stands behind each role
(``learned``, the default, ``heuristic``, ``vlm``, ``replay`` or a test's scripted one) is chosen by config
(``conf/agent/``). Every value here turns into JSON and back, because every decision is written to the trace and
a replayed or resumed run reads it from there.

Coordinates: a *region* is a block plus a halo, cut from the volume; it is what a block's work sees
(a pure function of the region's image, mask and the flag). An *edit frame* is the editor-sized box
inside a region where the editor is called; instruction positions name cells of that frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from neurorefiner.topology.blocks import Block, Slices, slices_from_list, slices_to_list
from neurorefiner.topology.instructions import Instruction, parse_instruction

if TYPE_CHECKING:
    from neurorefiner.agents.soma_guard import RegionSoma

ErrorKind = Literal["FN", "FP"]
KINDS: tuple[str, ...] = ("FN", "FP")


@dataclass
class CallInfo:
    """How a decision was made: for the trace (backend, prompt, raw answer, cost) and the report.

    ``requests`` (model-backed roles only) holds every request of the call as it was sent, with its answer
    verbatim: ``{"prompt": str, "images": [PNG bytes], "answer": str, ...}``. The trace writer stores the
    prompt and the pictures once by content hash beside the trace and keeps only their file names in the
    line (:class:`~neurorefiner.agents.trace.TraceWriter`), so a person can see what the model saw and a run
    can be asked again of another model. Traces without it (older runs, other backends) read the same."""

    backend: str
    prompt_id: str | None = None
    raw: Any = None
    seconds: float = 0.0
    tokens: dict | None = None
    notes: list[str] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = {"backend": self.backend, "prompt_id": self.prompt_id, "raw": self.raw,
               "seconds": round(self.seconds, 4), "tokens": self.tokens, "notes": list(self.notes)}
        if self.requests:
            out["requests"] = [dict(r) for r in self.requests]
        return out


class RoleError(RuntimeError):
    """A role could not decide (its model server failed, or answered nothing readable even when asked
    again). ``info`` carries what was asked and answered, so the loop can write it to the trace before
    the run stops or a fallback role answers instead."""

    def __init__(self, message: str, info: CallInfo | None = None) -> None:
        super().__init__(message)
        self.info = info


class UnreadableAdvice(Exception):
    """The Advisor answered, but not with an instruction of the grammar: one failed try. The loop keeps
    the answer (``info.raw``) in the trace, counts the try and asks again; the next call's ``history``
    holds it (an :class:`Attempt` without advice whose verdict carries this ``info``), so the Advisor can
    quote it back with the grammar."""

    def __init__(self, why: str, info: CallInfo) -> None:
        super().__init__(why)
        self.why = why
        self.info = info


@dataclass(frozen=True)
class Defect:
    """One thing to fix. ``anchors`` are volume voxel coordinates (ZYX): for an FN the two facing ends,
    for an FP a voxel of the piece; empty when the inspector named only the block (a VLM does)."""

    kind: str
    anchors: tuple[tuple[int, int, int], ...] = ()
    size: int = 0
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind}:" + ";".join(",".join(str(v) for v in a) for a in self.anchors)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "anchors": [list(a) for a in self.anchors], "size": self.size, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict) -> Defect:
        return cls(str(d["kind"]), tuple(tuple(int(v) for v in a) for a in d.get("anchors", ())),
                   int(d.get("size", 0)), str(d.get("note", "")))


@dataclass(frozen=True)
class Flag:
    """The Inspector's verdict on one block: its error type and, when known, the defects in it."""

    block: int
    kind: str
    defects: tuple[Defect, ...] = ()
    reason: str = ""

    def as_dict(self) -> dict:
        return {"block": self.block, "kind": self.kind, "defects": [d.as_dict() for d in self.defects],
                "reason": self.reason}

    @classmethod
    def from_dict(cls, d: dict) -> Flag:
        return cls(int(d["block"]), str(d["kind"]), tuple(Defect.from_dict(x) for x in d.get("defects", ())),
                   str(d.get("reason", "")))


@dataclass
class Inspection:
    """All flagged blocks of one round (empty = the morphology is judged complete)."""

    flags: dict[int, Flag]
    info: CallInfo

    def as_dict(self) -> dict:
        """Flags in the Inspector's order: it is the priority the cap per round follows, so a resumed or
        replayed run must read them back in the same order."""
        return {"flags": [f.as_dict() for f in self.flags.values()]}


@dataclass(frozen=True)
class EditFrame:
    """Where the editor is called: ``window`` (region coordinates) padded by ``pad`` to the editor's
    size. Positions in an instruction name cells of the padded frame."""

    window: Slices
    pad: tuple[tuple[int, int], ...]

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(s.stop - s.start + a + b for s, (a, b) in zip(self.window, self.pad))  # type: ignore

    def to_frame(self, points: np.ndarray) -> np.ndarray:
        """Region coordinates (N, 3) -> frame coordinates."""
        off = np.array([s.start - a for s, (a, _) in zip(self.window, self.pad)])
        return np.asarray(points).reshape(-1, 3) - off

    def as_dict(self) -> dict:
        return {"window": slices_to_list(self.window), "pad": [list(p) for p in self.pad]}

    @classmethod
    def from_dict(cls, d: dict) -> EditFrame:
        return cls(slices_from_list(d["window"]), tuple(tuple(int(v) for v in p) for p in d["pad"]))


@dataclass
class Advice:
    """The Advisor's instruction (positions in ``frame``) for one try at one defect."""

    instruction: Instruction
    frame: EditFrame
    info: CallInfo
    reason: str = ""
    said: str | None = None         # the instruction in the frame the advisor saw (a VLM: the whole block)

    def as_dict(self) -> dict:
        out = {"instruction": self.instruction.format(), "frame": self.frame.as_dict(), "reason": self.reason}
        if self.said is not None:
            out["said"] = self.said
        return out

    @classmethod
    def from_dict(cls, d: dict, info: CallInfo) -> Advice:
        return cls(parse_instruction(d["instruction"]), EditFrame.from_dict(d["frame"]), info, d.get("reason", ""),
                   d.get("said"))


@dataclass
class Verdict:
    """The Validator's decision on one edit."""

    accept: bool
    reason: str
    info: CallInfo
    checks: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"accept": self.accept, "reason": self.reason, "checks": self.checks}


@dataclass
class BlockContext:
    """What a block's work sees: the region (block + halo) of image and current mask, and where the
    block sits in it. ``image`` is normalised float32 in [0, 1]."""

    round: int
    block: Block
    region: Slices                  # volume coordinates of the region
    image: np.ndarray               # region image
    mask: np.ndarray                # region mask (the working copy: accepted edits of this block applied)
    editor_size: tuple[int, int, int]
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    soma: RegionSoma | None = None  # the soma's piece in this region when the soma is known (agents.soma_guard)
    _components: tuple[np.ndarray, int, np.ndarray] | None = field(default=None, init=False, repr=False,
                                                                     compare=False)

    @property
    def origin(self) -> np.ndarray:
        return np.array([s.start for s in self.region])

    def components(self) -> tuple[np.ndarray, int, np.ndarray]:
        """Labels, count and sizes (index = label) of the region mask's 26-connected components.

        Labelling the region is the heuristic roles' main cost: the Advisor and the Validator each need it
        for every try, and it changes only when an edit is accepted, so it is computed once per mask state
        (``apply`` forgets it). Callers must treat the arrays as read-only."""
        if self._components is None:
            from neurorefiner.topology.components import label_components

            labels, n = label_components(self.mask)
            self._components = (labels, n, np.bincount(labels.ravel(), minlength=n + 1))
        return self._components

    def apply(self, window: Slices, after: np.ndarray) -> None:
        """Write an accepted edit into the region mask (the only way the mask may change)."""
        self.mask[window] = after
        self._components = None

    @property
    def block_in_region(self) -> Slices:
        return tuple(slice(b.start - r.start, b.stop - r.start)  # type: ignore[return-value]
                     for b, r in zip(self.block.slices, self.region))


@dataclass(frozen=True)
class Step:
    """Which try this is: round, block, the defect's index in the flag and the attempt number."""

    round: int
    block: int
    defect: int
    attempt: int


@dataclass
class Attempt:
    """One advisor -> edit -> validate try, kept for the next try's advisor (feedback) and the trace."""

    step: Step
    advice: Advice | None
    verdict: Verdict | None
    added: int = 0
    removed: int = 0


@dataclass
class GlobalView:
    """What the Inspector sees of the whole volume in one round."""

    round: int
    image: np.ndarray
    mask: np.ndarray
    blocks: Sequence[Block]
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    inputs: tuple[str, ...] = ("global_mip", "block_mips", "betti0")
    root: tuple[float, float, float] | None = None   # ZYX voxels of the soma when known: the tree to grow


@runtime_checkable
class Inspector(Protocol):
    """Flags blocks that break the topological prior, each as FN or FP."""

    name: str

    def inspect(self, view: GlobalView) -> Inspection: ...


@runtime_checkable
class Advisor(Protocol):
    """Writes one instruction of the grammar for one defect (None: nothing left to try)."""

    name: str

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None: ...


@runtime_checkable
class Validator(Protocol):
    """Accepts an edit only if topology improved and the change did what the instruction said."""

    name: str

    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict: ...


@runtime_checkable
class Editor(Protocol):
    """Edits one block with one instruction; ``TopoRefiner.edit`` has exactly this signature. The result
    is the bool mask of the block's shape, or an object whose ``.mask`` is (a reason may travel with it)."""

    def edit(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: str | Instruction) -> Any: ...
