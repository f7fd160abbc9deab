"""Chains of fragments: a break made of several gaps in a row, joined to the tree as one decision.

Why: the join search offers joins to the tree only (:mod:`neurorefiner.agents.candidates` says why: between two
loose pieces nineteen in twenty joins were wrong on DIADEM dev). A neurite broken into a series of pieces is
then joined one piece per round, and only while every link on the way passes the judge on its own. A link to a
speck or a short stub on the way (a 13-voxel piece whose axis the judge cannot read, a gap whose far side is
one voxel) fails, and the fragment beyond it is never reached; meanwhile the removal search, which sees that
fragment as an isolated piece, deletes it.

A **chain** is a path of gaps tree -> A -> ... -> B: each gap within ``reach_um``, the pieces on the way
(``via``) small (at most ``via_max_size`` voxels: stepping stones, not structure the judge should weigh on
its own), B a piece that may end a join (``join_min_size``). It is scored by the same judge, as the join of B
to the tree it amounts to: the features of one join composed from its links (:func:`compose`: the gaps summed,
the signal read along every bridge, the facing and alignment of its two outer ends, B's size, brightness and
shape), so the judge reads it as the join the tree would see with the stepping stones part of the gap. A chain
that passes the judge and the join gate is planned (:func:`plan`) as one instruction per gap, except that a gap
ending at a speck (smaller than ``join_min_size``; the editor does not end a bridge at one) is merged with the
next one into a single instruction naming the ends on either side: the decoding bridges across the speck.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.agents.candidates import Candidate, CandidateSet, PieceContext, join_between
from neurorefiner.agents.learned.judge import CropView, Judge
from neurorefiner.agents.pieces import UnionFind

CLUTTER_RADIUS_UM = 10.0  # as the join search counts the joins near a join's tree end


@dataclass(frozen=True)
class Chain:
    """A path of gaps from the tree (``path[0]``) to a loose piece (``path[-1]``); ``links[k]`` joins
    ``path[k + 1]`` (its attached side) to ``path[k]``; ``joined`` is the whole chain as one join candidate
    (what the judge scores)."""

    path: tuple[int, ...]
    links: tuple[Candidate, ...]
    joined: Candidate


def _near(cx: PieceContext, p: int, pool: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[int]:
    """Pieces of ``pool`` whose bounding box comes within reach of piece ``p``'s (a cheap first cut)."""
    sep = np.maximum(0.0, np.maximum(lo[p] - hi[pool], lo[pool] - hi[p]))
    return pool[np.linalg.norm(sep, axis=1) <= cx.s.reach_um].tolist()


def find_chains(found: CandidateSet, max_links: int = 2, via_max_size: int = 50, max_chains: int = 1000
                ) -> list[Chain]:
    """Every chain of 2 to ``max_links`` gaps from the tree of ``found`` (module docstring), through pieces of
    at most ``via_max_size`` voxels, to a piece of at least ``join_min_size``; at most ``max_chains`` (a guard
    on noise fields), shortest first."""
    cx = found.context
    if cx is None or max_links < 2 or not found.main:
        return []
    tree = cx.main
    b = np.asarray(cx.boxes, dtype=float)
    lo, hi = b[:, [0, 2, 4]] * cx.sp, b[:, [1, 3, 5]] * cx.sp
    ranked = np.asarray(cx.ranked_pieces(1))
    via_pool = ranked[cx.sizes[ranked] <= via_max_size]
    end_pool = ranked[(cx.sizes[ranked] >= cx.s.join_min_size) & (ranked != tree)]
    links: dict[tuple[int, int], Candidate | None] = {}

    def link(far: int, near: int) -> Candidate | None:
        if (far, near) not in links:
            links[(far, near)] = join_between(cx, far, near)
        return links[(far, near)]

    chains: list[Chain] = []
    frontier: list[tuple[tuple[int, ...], tuple[Candidate, ...]]] = [((tree,), ())]
    for depth in range(1, max_links + 1):
        grown = []
        for path, made in frontier:
            last = path[-1]
            if depth >= 2:
                for q in _near(cx, last, end_pool, lo, hi):
                    c = None if q in path or len(chains) >= max_chains else link(q, last)
                    if c is not None:
                        chains.append(Chain(path + (q,), made + (c,), compose(found, made + (c,))))
            if depth < max_links:
                for q in _near(cx, last, via_pool, lo, hi):
                    c = None if q in path else link(q, last)
                    if c is not None:
                        grown.append((path + (q,), made + (c,)))
        frontier = grown
    return chains


def _rel(found: CandidateSet, values: np.ndarray) -> np.ndarray:
    bg, fg = found.levels
    return (np.asarray(values, np.float64) - bg) / (fg - bg)


def _joins_near(found: CandidateSet, at: Sequence[int]) -> float:
    """How many other join candidates of the mask end on the tree within ``CLUTTER_RADIUS_UM`` of ``at`` (a join
    ending at ``at`` itself is the chain's own first gap, as the join search leaves a join out of its count)."""
    ends = np.array([c.anchors[1] for c in found.of_kind("join")], float).reshape(-1, 3)
    d = np.linalg.norm((ends - np.asarray(at, float)) * np.asarray(found.spacing), axis=1)
    return float(int((d <= CLUTTER_RADIUS_UM).sum()) - int((d == 0).any()))


def compose(found: CandidateSet, links: Sequence[Candidate]) -> Candidate:
    """The links (tree side first, each attached side farther out) as one join of the last link's attached
    piece to the first link's: the join's features read off the whole chain (module docstring)."""
    cx = found.context
    assert cx is not None
    first, last = links[0], links[-1]
    f0, f1 = first.features, last.features
    paths = [np.asarray(c.voxels, np.int64).reshape(-1, 3) for c in links]
    inner = np.concatenate([p[1:-1] if len(p) > 2 else p for p in paths])
    vals = _rel(found, cx.image[tuple(inner.T)])
    straight = []
    for c in links:
        a, b = np.asarray(c.anchors[0]), np.asarray(c.anchors[1])
        n = max(int(np.ceil(c.features["gap_um"] / cx.sp.min())), 2)
        straight.append(np.rint(a[None] + np.linspace(0, 1, n)[:, None] * (b - a)[None]).astype(int))
    line = _rel(found, cx.image[tuple(np.concatenate(straight).T)])
    gap = float(sum(c.features["gap_um"] for c in links))
    steps = sum(float(np.linalg.norm(np.diff(p * cx.sp, axis=0), axis=1).sum()) for p in paths if len(p) > 1)
    end, start = last.anchors[0], first.anchors[1]
    feats = {
        **f1,                                           # the attached side: the far piece, as its own link reads it
        **{k: v for k, v in f0.items() if "big" in k},  # the side attached to: the tree, as the first link reads it
        "gap_um": gap,
        "gap_z_um": float(sum(c.features["gap_z_um"] for c in links)),
        "small_is_main": 0.0,
        "path_q25": float(np.percentile(vals, 25)), "path_min": float(vals.min()), "path_mean": float(vals.mean()),
        "straight_q25": float(np.percentile(line, 25)),
        "path_tortuosity": steps / max(gap, 1e-6),
        "small_dist_main_um": float(cx.dist_to_main(np.asarray(end))[0]) if first.pieces[1] == cx.main else gap,
        "joins_near": _joins_near(found, start),
        "log_joins_in_mask": float(np.log1p(len(found.of_kind("join")))),
    }
    return Candidate("join", (end, start), (last.pieces[0], first.pieces[1]), feats, np.concatenate(paths))


def plan(found: CandidateSet, chain: Chain, done: set[tuple[int, int]] | None = None) -> list[Candidate]:
    """The instructions that make ``chain``, tree side first: one join per gap, a gap ending at a speck merged
    with the next gap (:func:`compose`); a single gap between two pieces already in ``done`` (pairs joined by
    another chosen edit, smaller label first) is left out."""
    done = done or set()
    out: list[Candidate] = []
    group: list[Candidate] = []
    for k, c in enumerate(chain.links):
        group.append(c)
        far = chain.path[k + 1]
        if far != chain.path[-1] and found.sizes[far] < found.context.s.join_min_size:  # type: ignore[union-attr]
            continue
        pair = tuple(sorted(int(v) for v in c.pieces))
        if not (len(group) == 1 and pair in done):
            out.append(group[0] if len(group) == 1 else compose(found, group))
        group = []
    return out


def choose_chains(found: CandidateSet, chains: Sequence[Chain], p: np.ndarray, passed: np.ndarray,
                  taken: Sequence[Candidate], gate: Callable[[Candidate], bool] | None = None
                  ) -> list[tuple[Chain, float]]:
    """The chains to make, most probable first: each passes the judge (``passed``) and ``gate`` and joins to the
    tree a piece that neither an already ``taken`` join nor an earlier chain joins."""
    uf = UnionFind()
    for c in taken:
        uf.union(*c.pieces)
    out = []
    for i in np.argsort(-np.asarray(p), kind="stable"):
        ch = chains[int(i)]
        if not passed[i] or (gate is not None and not gate(ch.joined)):
            continue
        if uf.find(ch.path[-1]) == uf.find(ch.path[0]):
            continue
        for a, b in zip(ch.path, ch.path[1:]):
            uf.union(a, b)
        out.append((ch, float(p[i])))
    return out


def with_chains(found: CandidateSet, chosen: Sequence[tuple[Candidate, float]], judge: Judge,
                gate: Callable[[Candidate], bool] | None = None, view: CropView | None = None, max_links: int = 2,
                via_max_size: int = 50) -> list[tuple[Candidate, float]]:
    """``chosen`` (the Inspector's edits: joins, then removals, then prunes) with the chains the judge passes
    planned in after the joins (each planned join marked ``chain_gaps``: how many gaps its chain has, with the
    chain's probability), and no removal of a piece a chosen chain passes through or ends at."""
    from dataclasses import replace

    chains = find_chains(found, max_links, via_max_size)
    if not chains:
        return list(chosen)
    joined = [c.joined for c in chains]
    p, passed = judge.decide(joined) if view is None else judge.decide(joined, view)
    joins = [(c, q) for c, q in chosen if c.kind == "join"]
    picked = choose_chains(found, chains, p, passed, [c for c, _ in joins], gate)
    done = {tuple(sorted(int(v) for v in c.pieces)) for c, _ in joins}
    planned: list[tuple[Candidate, float]] = []
    on_chain: set[int] = set()
    for ch, q in picked:
        on_chain.update(ch.path[1:])
        for c in plan(found, ch, done):
            planned.append((replace(c, features={**c.features, "chain_gaps": float(len(ch.links))}), q))
            done.add(tuple(sorted(int(v) for v in c.pieces)))
    rest = [(c, q) for c, q in chosen if c.kind != "join" and not (c.kind == "remove" and c.pieces[0] in on_chain)]
    return joins + planned + rest
