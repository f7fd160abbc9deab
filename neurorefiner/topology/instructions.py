"""The instruction grammar shared by the agents, the training data and TopoRefineNet.

An :class:`Instruction` is a value: an operation and one or two grid positions (see
:mod:`neurorefiner.topology.positions` for the words and the axes they name). It has one formatter,
:meth:`Instruction.format`, which writes the paper's forms::

    Connect neuron from top-left-rear to bottom-left-front     (long break: both ends)
    Repair break at top-right-front                            (short break: where it is)
    Remove isolated noise at center-right-rear                 (false positive: where it is)
    Remove noise from top-left-front to top-right-front        (elongated false positive)

and one parser, :func:`parse_instruction`, tolerant of what people and language models write: any
case, hyphens or spaces, the three words of a position in any order, missing axes (read as center),
synonyms (upper, lower, middle, centre, posterior, back, anterior), extra words ("the", "isolated",
"artifact/noise", "neurons located in the") and the paper's own word orders ("right-center-rear").
Where the meaning is clear it also reads the paper's free phrasings: a connection that names one
place ("Connect the neurons located in the middle upper posterior region", the paper's Figure 2) is a
repair there, and a repair that names two places is the connection between them. What it cannot read
raises :class:`InstructionParseError` with the grammar in its message.

This module depends only on :mod:`neurorefiner.topology.positions`, so the defect generators and the
data modules (which sit below the agents) can build instructions through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from neurorefiner.topology.positions import (
    CENTER_WORDS,
    POSITION_WORDS,
    Position,
    PositionError,
    all_positions,
    parse_position,
    position_from_words,
    position_word,
    region_mask,
)

Op = Literal["connect", "repair", "remove"]
OPS: tuple[str, ...] = ("connect", "repair", "remove")

GRAMMAR = """\
Instructions take one of these forms (case, hyphens/spaces and the order of the three position words
do not matter; filler words such as 'the', 'isolated', 'artifact' are ignored):
  Connect neuron from <position> to <position>
  Repair break at <position>
  Remove isolated noise at <position>
  Remove noise from <position> to <position>
<position> = <vertical>-<horizontal>-<depth> on a 3x3x3 grid of the block:
  vertical   top | center | bottom   (Y: top = first rows)
  horizontal left | center | right   (X: left = first columns)
  depth      front | center | rear   (Z: front = first slices)
e.g. 'Connect neuron from top-left-rear to bottom-left-front', 'Repair break at top-right-front'."""

# verbs (and the nouns that go with them) that name an operation
_OP_WORDS: dict[str, str] = {
    **dict.fromkeys(("connect", "connecting", "connects", "reconnect", "join", "link", "bridge"),
                    "connect"),
    **dict.fromkeys(("repair", "repairing", "repairs", "fix", "mend", "fill", "close"), "repair"),
    **dict.fromkeys(("remove", "removing", "removes", "delete", "erase", "eliminate", "clean",
                     "suppress"), "remove"),
}
# words that end one position and start the next
_SEPARATORS = frozenset({"to", "and", "from", "between", "towards", "toward", "through", "via", "until",
                         "till", "at", "in", "on", "with", "into"})
# words we know and skip; an unknown word that looks like a misspelt position word is an error
_FILLER = frozenset({
    "the", "a", "an", "of", "neuron", "neurons", "neurite", "neurites", "fiber", "fibre", "branch",
    "break", "breaks", "gap", "gaps", "isolated", "noise", "artifact", "artifacts", "artefact", "blob",
    "blobs", "located", "region", "regions", "part", "side", "corner", "area", "block", "position",
    "near", "segment", "segments", "small", "please", "broken", "spurious", "fragment",
    "fragments", "structure", "structures", "signal", "false", "positive", "negative", "discontinuity",
    "this", "that", "its", "it", "there", "here", "is", "are", "point", "points", "end", "ends", "or",
})


class InstructionParseError(ValueError):
    """Text that is not an instruction of the grammar; the message lists the grammar."""

    def __init__(self, problem: str, text: str | None = None):
        self.problem = problem
        self.text = text
        where = f" in {text!r}" if text is not None else ""
        super().__init__(f"cannot read instruction{where}: {problem}\n{GRAMMAR}")


@dataclass(frozen=True)
class Instruction:
    """One edit: ``op`` at ``start`` (repair, remove) or from ``start`` to ``end`` (connect, remove).

    Positions may be given as strings (``Instruction("connect", "top-left-rear", "bottom-left-front")``);
    they are parsed into :class:`Position` values.
    """

    op: Op
    start: Position
    end: Position | None = None

    def __post_init__(self) -> None:
        op = str(self.op).lower()
        if op not in OPS:
            raise ValueError(f"operation must be one of {OPS}, got {self.op!r}")
        try:
            start = parse_position(self.start)
            end = None if self.end is None else parse_position(self.end)
        except PositionError as exc:
            raise ValueError(str(exc)) from exc
        if op == "connect" and end is None:
            raise ValueError("connect needs two positions (from, to)")
        if op == "repair" and end is not None:
            raise ValueError("repair takes one position (at)")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)

    @property
    def positions(self) -> tuple[Position, ...]:
        return (self.start,) if self.end is None else (self.start, self.end)

    def format(self) -> str:
        """The one canonical text of this instruction (what the text encoder sees)."""
        s = self.start.format()
        if self.op == "connect":
            return f"Connect neuron from {s} to {self.end.format()}"
        if self.op == "repair":
            return f"Repair break at {s}"
        if self.end is None:
            return f"Remove isolated noise at {s}"
        return f"Remove noise from {s} to {self.end.format()}"

    def __str__(self) -> str:
        return self.format()

    def region(self, shape: Sequence[int]) -> np.ndarray:
        """Boolean (D, H, W) mask of the sub-region this instruction names: the start cell, or the box
        spanning the start and end cells (a connection runs between them)."""
        return region_mask(shape, list(self.positions), hull=True)

    def flipped(self, array_axes: Sequence[int]) -> Instruction:
        """The instruction for the block mirrored along ``array_axes`` (0 = z, 1 = y, 2 = x)."""
        return Instruction(self.op, self.start.flipped(array_axes),
                           None if self.end is None else self.end.flipped(array_axes))

    def opposite(self) -> Instruction:
        """The same place with the opposite kind of edit (connect/repair <-> remove): a control for
        instruction-following experiments."""
        if self.op == "remove":
            return Instruction("repair", self.start) if self.end is None else Instruction("connect", self.start,
                                                                                          self.end)
        return Instruction("remove", self.start, self.end)

    def elsewhere(self) -> Instruction:
        """The same edit at a deliberately wrong place: the positions whose named region overlaps this
        one's least (ties: farthest away, then the same size of region). A control for experiments;
        deterministic. Regions that span the whole grid along every axis cannot avoid overlap."""

        def box(ps: Sequence[Position]) -> np.ndarray:
            cells = np.array([p.cell for p in ps])
            return np.stack([cells.min(axis=0), cells.max(axis=0) + 1])  # (2, 3) cell ranges

        mine = box(self.positions)
        size = mine[1] - mine[0]
        centre = mine.mean(axis=0)
        cells = all_positions()
        pairs = [(a,) for a in cells] if self.end is None else [(a, b) for a in cells for b in cells if a != b]
        best, best_key = None, None
        for ps in pairs:
            other = box(ps)
            overlap = int(np.prod(np.clip(np.minimum(mine[1], other[1]) - np.maximum(mine[0], other[0]), 0, None)))
            key = (overlap, -float(np.abs(other.mean(axis=0) - centre).sum()),
                   int(np.abs((other[1] - other[0]) - size).sum()))
            if best_key is None or key < best_key:
                best, best_key = ps, key
        return Instruction(self.op, best[0], best[1] if len(best) > 1 else None)

    @classmethod
    def parse(cls, text: str | Instruction) -> Instruction:
        return parse_instruction(text)


def _damerau1(a: str, b: str) -> bool:
    """True when a and b differ by at most one edit (insert, delete, substitute, swap neighbours)."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    if la > lb:
        a, b = b, a
    return any(a == b[:i] + b[i + 1:] for i in range(len(b)))


def _looks_like_position_word(word: str) -> str | None:
    if len(word) < 4:
        return None
    for w in sorted(POSITION_WORDS):
        if _damerau1(word, w):
            return w
    return None


def _group_positions(tokens: list[str], text: str) -> list[list[str]]:
    """Split the position words into positions: at separator words, or when a word would clash with
    the position being read (second word on an axis, a fourth word)."""
    groups: list[list[str]] = []
    cur: list[str] = []
    axes: set[str] = set()

    def close() -> None:
        nonlocal cur, axes
        if cur:
            groups.append(cur)
        cur, axes = [], set()

    for tok in tokens:
        if tok in _SEPARATORS:
            close()
            continue
        found = position_word(tok)
        if found is None:
            if tok in _OP_WORDS or tok in _FILLER:
                continue
            guess = _looks_like_position_word(tok)
            if guess is not None:
                raise InstructionParseError(f"unknown word {tok!r} (did you mean {guess!r}?)", text)
            continue
        axis = found[0]
        if len(cur) == 3 or (axis != "center" and axis in axes):
            close()
        elif axis == "center" and sum(w in CENTER_WORDS for w in cur) + 1 > 3 - len(axes):
            close()
        cur.append(tok)
        if axis != "center":
            axes.add(axis)
    close()
    return groups


def parse_instruction(text: str | Instruction) -> Instruction:
    """Read an instruction written in (a tolerant version of) the grammar; see the module docstring."""
    if isinstance(text, Instruction):
        return text
    if not isinstance(text, str):
        raise InstructionParseError(f"expected a string, got {type(text).__name__}")
    tokens = [t for t in re.split(r"[^a-z]+", text.lower()) if t]
    ops = {_OP_WORDS[t] for t in tokens if t in _OP_WORDS}
    if not ops:
        raise InstructionParseError("no operation (connect, repair or remove)", text)
    if len(ops) > 1:
        raise InstructionParseError(f"more than one operation ({', '.join(sorted(ops))}); give one per "
                                    "instruction", text)
    op = ops.pop()
    groups = _group_positions(tokens, text)
    try:
        positions = [position_from_words(g) for g in groups]
    except PositionError as exc:
        raise InstructionParseError(str(exc), text) from exc
    if op == "connect" and len(positions) == 1:
        op = "repair"       # "Connect the neurons located in the middle upper posterior region" (Figure 2)
    elif op == "repair" and len(positions) == 2:
        op = "connect"      # "Repair the break from A to B": a break with two named ends is a connection
    want = {"connect": (2,), "repair": (1,), "remove": (1, 2)}[op]
    if len(positions) not in want:
        need = " or ".join(str(n) for n in want)
        raise InstructionParseError(f"{op} takes {need} position(s), found {len(positions)}"
                                    + (f": {', '.join(p.format() for p in positions)}" if positions else ""),
                                    text)
    return Instruction(op, positions[0], positions[1] if len(positions) > 1 else None)


def all_instructions(include_same_cell: bool = False) -> Iterator[Instruction]:
    """Every instruction of the grammar (for caching text embeddings of the finite set): 27 repairs,
    27 single removals, and connections / two-position removals between every ordered pair of cells
    (distinct cells unless ``include_same_cell``)."""
    cells = all_positions()
    for p in cells:
        yield Instruction("repair", p)
        yield Instruction("remove", p)
    for a in cells:
        for b in cells:
            if a == b and not include_same_cell:
                continue
            yield Instruction("connect", a, b)
            yield Instruction("remove", a, b)
