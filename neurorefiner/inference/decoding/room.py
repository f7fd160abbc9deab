"""Where a join may happen (:class:`Room`): the named place grown into a search room, the components that may
end a bridge in it (pieces of neurite, not specks or blobs of noise), and which of them meet the start and end
places. For ``repair at P`` with fewer than two pieces at P the room grows until the two ends of the break,
facing each other across P, are in it; a stub too short to pass for neurite counts as an end there."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.context import Context, context_groups, outside_contact
from neurorefiner.inference.decoding.geometry import box_of, grow, label_components, straight_line
from neurorefiner.topology.instructions import Instruction


def _elongated(piece: np.ndarray, ratio: float) -> bool:
    """Is the piece a stretch of neurite rather than a blob: its length along its main direction at
    least ``ratio`` times the cube root of its volume (a tube of length 10 and radius 1.5: about 2.4;
    a ball: about 1.2)."""
    from neurorefiner.defects.describe import principal_extent

    coords = np.argwhere(piece)
    if len(coords) < 2:
        return False
    length, _ = principal_extent(coords)
    return length >= ratio * len(coords) ** (1.0 / 3.0)


def _join_candidates(labels: np.ndarray, n: int, search: np.ndarray, touches: np.ndarray,
                     cfg: DecodingConfig, prob: np.ndarray | None = None) -> list[int]:
    """Components that may end a bridge in the search room: they meet it, are no speck (``min_piece``) and
    are a piece of neurite rather than a blob of noise next to one (they continue beyond the room or out of
    the block, are large, are a sliver, or are elongated)."""
    size = np.bincount(labels.ravel(), minlength=n + 1)
    in_search = np.bincount(labels[search], minlength=n + 1)
    sliver = size <= cfg.max_sliver
    if prob is not None and sliver.any():  # a sliver the network removes is a speck, not a stretch of neurite
        kept = np.bincount(labels.ravel(), weights=(np.asarray(prob) >= cfg.threshold).ravel(), minlength=n + 1)
        sliver &= kept >= 0.5 * size
    anchored = (in_search < size) | (touches > 0) | (size >= cfg.min_anchor) | sliver
    return [k for k in range(1, n + 1) if in_search[k] > 0 and size[k] >= cfg.min_piece
            and (anchored[k] or _elongated(labels == k, cfg.min_elongation))]


def _end_towards(piece: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The voxel of ``piece`` nearest to ``centre`` (the end of a broken neurite that faces the gap)."""
    pts = np.argwhere(piece)
    return pts[int(np.argmin(((pts - centre) ** 2).sum(axis=1)))]


def _faces_across(a: np.ndarray, b: np.ndarray, cell: np.ndarray) -> bool:
    """Whether the straight gap between the ends ``a`` and ``b`` crosses the named cell: the two pieces face
    each other across it (a break at the cell), not both from one side (a fork or two passing neurites)."""
    return bool((straight_line(a, b, cell.shape) & cell).any())


def _pieces_at(labels: np.ndarray, n: int, room: np.ndarray, cfg: DecodingConfig) -> list[int]:
    """Every component that meets ``room`` and is no speck (``min_piece``), neurite-like or not: the ends a
    person's named break may join when no two pieces of neurite (:func:`_join_candidates`) face each other
    across it. A cut near a branch's tip leaves a stub of tens of voxels that neither reaches the block's
    border nor is longer than it is wide: to the shape test it is a blob, to the person naming the break it is
    the other end."""
    size = np.bincount(labels.ravel(), minlength=n + 1)
    meets = np.bincount(labels[room], minlength=n + 1) > 0
    return [k for k in range(1, n + 1) if meets[k] and size[k] >= cfg.min_piece]


def _facing_pair(labels: np.ndarray, found: list[int], groups: np.ndarray, centre: np.ndarray,
                 cell: np.ndarray) -> list[int] | None:
    """The two nearest pieces of ``found`` (by the end facing ``centre``), of different groups, whose ends face
    each other across ``cell``; None when no such pair."""
    ends = {k: _end_towards(labels == k, centre) for k in found}
    nearest = sorted(found, key=lambda k: float(((ends[k] - centre) ** 2).sum()))
    for i, a in enumerate(nearest):
        for b in nearest[i + 1:]:
            if groups[a] != groups[b] and _faces_across(ends[a], ends[b], cell):
                return [a, b]
    return None


def _reach_for_ends(labels: np.ndarray, n: int, region: np.ndarray, groups: np.ndarray, touches: np.ndarray,
                    cfg: DecodingConfig, search: np.ndarray, candidates: list[int]) -> tuple[np.ndarray, list[int]]:
    """``repair at P`` with fewer than two pieces at P: a person names a break by pointing at its gap, and a
    gap as long as the cell leaves the ends outside the usual room. Grow the room one voxel at a time up to
    ``connect_reach`` until two pieces meet it; keep the two nearest whose ends face each other across P.
    When no two pieces of neurite do, the same search runs over every piece that is no speck
    (:func:`_pieces_at`): the person's word that a break is there outweighs the shape test, which is meant to
    keep a blob of noise from being joined on a guess; the bridge still has to keep within the limits.
    Returns the room and candidates to join in (the given ones when no such pair is within reach)."""
    cell = grow(region, cfg.margin)
    centre = np.argwhere(region).mean(axis=0)
    searches = ((lambda room: _join_candidates(labels, n, room, touches, cfg), cfg.connect_margin + 1),
                (lambda room: _pieces_at(labels, n, room, cfg), cfg.connect_margin))
    for pick, first in searches:
        for reach in range(first, cfg.connect_reach + 1):
            room = grow(region, reach)
            found = pick(room)
            if len({int(groups[k]) for k in found}) < 2:
                continue
            pair = _facing_pair(labels, found, groups, centre, cell)
            if pair is not None:
                return room, pair
    return search, candidates


@dataclass
class Room:
    """Where a join may happen: the block's components, their groups (joined outside the block), the search
    room, the pieces that may end a bridge there, and which of them meet the start and end places."""

    labels: np.ndarray
    groups: np.ndarray
    search: np.ndarray
    candidates: list[int]
    box: tuple[slice, ...]
    start_groups: set[int]
    end_groups: set[int]

    @property
    def cand_groups(self) -> set[int]:
        return {int(self.groups[k]) for k in self.candidates}


def connect_room(mask: np.ndarray, instruction: Instruction, cfg: DecodingConfig, context: Context,
                 prob: np.ndarray | None = None) -> Room:
    """The room of a join (:class:`Room`): the named place grown by ``connect_margin`` (for ``repair at P``
    with fewer than two pieces there, grown up to ``connect_reach`` by :func:`_reach_for_ends`); any two
    candidates may be joined for a repair, one at each named end for a connection."""
    shape = mask.shape
    region = instruction.region(shape)
    labels, n = label_components(mask)
    groups = context_groups(labels, n, context)
    touches = np.bincount(labels[outside_contact(mask, context)], minlength=n + 1)
    search = grow(region, cfg.connect_margin)
    candidates = _join_candidates(labels, n, search, touches, cfg, prob)
    if instruction.op == "repair" and len({int(groups[k]) for k in candidates}) < 2:
        search, candidates = _reach_for_ends(labels, n, region, groups, touches, cfg, search, candidates)
    box = box_of(search)
    if instruction.op == "connect":
        lab = labels[box]
        ends = [grow(p.region(shape), cfg.connect_margin)[box] for p in instruction.positions]
        at = [set(np.unique(lab[e & (lab > 0)]).tolist()) for e in ends]
    else:
        at = [set(candidates), set(candidates)]
    sides = [{int(groups[k]) for k in a if k in candidates} for a in at]
    return Room(labels, groups, search, candidates, box, sides[0], sides[1])
