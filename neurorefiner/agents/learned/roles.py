"""The ``learned`` agent backend: the three roles deciding from the judge's scores of every candidate edit.

* **Inspector**: enumerates every candidate of the current mask (joins within reach, isolated pieces, terminal
  branches of the skeleton), has the judge score them, and flags the blocks holding the ones that pass:
  a join as a break (``FN``, its two ends), removals as noise (``FP``: a block's isolated pieces that one
  editor frame holds as one defect, :mod:`neurorefiner.agents.learned.noise_groups`), a prune as attached
  false structure (``FP_ATTACHED``, the branch's tip then its junction). Joins are taken most probable first and
  only while they join pieces not yet joined, so a chain of fragments gives a chain of breaks. With
  ``chain_joins`` a break made of several gaps in a row (through specks and stubs the judge cannot weigh alone)
  is judged as one join and planned gap by gap (:mod:`neurorefiner.agents.learned.chains`).
* **Advisor** (:mod:`neurorefiner.agents.learned.advisor`): the grammar's sentence for each candidate, its
  places read in an editor frame placed as the editor's training crops hold their defects.
* **Validator**: the heuristic Validator's rule checks (compliance, topology) and, beside them, the judge:
  an edit that deletes voxels of the root's tree is accepted only for a branch the judge flagged, and never
  when it splits the tree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from neurorefiner.agents.candidates import Candidate, CandidateSettings, find_candidates
from neurorefiner.agents.heuristic.validator import HeuristicValidator
from neurorefiner.agents.learned.advisor import LearnedAdvisor  # noqa: F401 - the learned backend's Advisor
from neurorefiner.agents.learned.attached_piece import PieceCheck
from neurorefiner.agents.learned.judge import CropView, Judge
from neurorefiner.agents.learned.noise_groups import DEFAULT_SPAN, group_noise
from neurorefiner.agents.learned.visibility import ALL_INPUTS, visible
from neurorefiner.agents.pieces import UnionFind
from neurorefiner.agents.roles import (
    Advice,
    BlockContext,
    CallInfo,
    Defect,
    Flag,
    GlobalView,
    Inspection,
    Step,
    Verdict,
)
from neurorefiner.topology.blocks import Block, block_of_point

ATTACHED = "FP_ATTACHED"
"""A defect kind beyond the paper's FN / FP: false structure merged into the neuron (a spur, a touching fibre)."""


def shipped_judge() -> Path:
    from neurorefiner.paths import project_root

    return project_root() / "checkpoints" / "judge.json"


def _load_judge(judge: str | Path | Judge | None) -> Judge:
    if isinstance(judge, Judge):
        return judge
    return Judge.load(judge or shipped_judge())


def with_thresholds(judge: Judge, thresholds: Mapping[str, float] | None) -> Judge:
    """``judge`` deciding at ``thresholds`` (per kind; kinds not named keep the judge's own): a refiner's plan sets
    them, chosen on validation by the tables' score (:mod:`neurorefiner.adaptation.choose`), not by the judge's
    per-candidate precision floor."""
    if not thresholds:
        return judge
    import dataclasses

    return dataclasses.replace(judge, thresholds={**judge.thresholds, **{k: float(v) for k, v in thresholds.items()}})


def join_gate(c: Candidate, signal_min: float = 0.25, max_crowding: float = 4, reach_um: float = 8.0,
              piece: PieceCheck | None = PieceCheck()) -> bool:
    """Two priors a join must pass besides the judge (chosen on DIADEM dev): the gap holds image signal (its
    brightest path's lower quartile at least ``signal_min`` of the way from background to foreground, the bar
    shrinking with the gap: a few dim voxels are where a threshold cut a neurite, a long dark gap is two
    fibres), and the place is not crowded (at most ``max_crowding`` other joins within 10 um: a tree beset by
    loose pieces is a noisy stack or other fibres). Leave one stack out, the judge alone joined the tree to
    bright fibres the gold never traced (unlabelled, beyond its scope) across dark gaps and, round after round,
    into a noisy stack's specks: OP_2 fell from 0.92 / 0.95 F1 to 0.56 / 0.46 (U-Net / nnU-Net-style masks).
    And a third (``piece``, at conf/agent/learned.yaml's defaults unless given; None: not asked): a large piece
    the join brings into the tree must be about as bright as the tree
    (:mod:`neurorefiner.agents.learned.attached_piece`): a good gap to a false piece is still a false join."""
    if c.kind != "join":
        return True
    f = c.features
    bar = signal_min * min(1.0, f["gap_um"] / reach_um)
    if f["path_q25"] < bar or f.get("joins_near", 0.0) > max_crowding:
        return False
    return piece is None or piece.passes(c)


def choose(candidates: Sequence[Candidate], p: np.ndarray, passed: np.ndarray, prune: bool = True,
           gate: Callable[[Candidate], bool] | None = None) -> list[tuple[Candidate, float]]:
    """The edits to make, in the order to make them: joins (most probable first, each joining pieces not yet
    joined, each through ``gate``), then removals of pieces no chosen join uses, then prunes."""
    order = np.argsort(-p, kind="stable")
    joins, uf, joined = [], UnionFind(), set()
    for i in order:
        c = candidates[i]
        if passed[i] and c.kind == "join" and (gate is None or gate(c)) and uf.union(*c.pieces):
            joins.append((c, float(p[i])))
            joined.update(c.pieces)
    removals = [(candidates[i], float(p[i])) for i in order
                if passed[i] and candidates[i].kind == "remove" and candidates[i].pieces[0] not in joined]
    prunes = [(candidates[i], float(p[i])) for i in order if prune and passed[i] and candidates[i].kind == "prune"]
    return joins + removals + prunes


def _defect(c: Candidate, p: float) -> Defect:
    f = c.features
    if c.kind == "join":
        chain = f" (a chain of {int(f['chain_gaps'])} gaps)" if "chain_gaps" in f else ""
        return Defect("FN", c.anchors, int(np.expm1(f["log_size_small"])),
                      f"join p={p:.2f}: gap {f['gap_um']:.1f} um, signal {f['path_q25']:.2f}{chain}")
    if c.kind == "remove":
        return Defect("FP", c.anchors, int(np.expm1(f["log_size"])),
                      f"remove p={p:.2f}: piece of {int(np.expm1(f['log_size']))} voxels, "
                      f"{f['dist_main_um']:.1f} um from the tree")
    return Defect(ATTACHED, c.anchors, int(np.expm1(f["log_voxels"])),
                  f"prune p={p:.2f}: branch of {f['length_um']:.1f} um, continuity {f['continuity']:.2f}")


class LearnedInspector:
    """Flags blocks from the judge's scores of every candidate (module docstring). The candidates come from the
    3D components; with Table 5's restricted inputs (MIPs without Betti-0) only those the given views show are
    judged (:mod:`neurorefiner.agents.learned.visibility`)."""

    name = "learned"

    def __init__(self, judge: str | Path | Judge | None = None, reach_um: float = 8.0, join_min_size: int = 10,
                 prune_min_piece: int = 200, prune_min_um: float = 3.0, prune: bool = True,
                 join_signal_min: float = 0.25, join_max_crowding: float = 4, group_noise: bool = True,
                 noise_span: Sequence[int] = DEFAULT_SPAN, chain_joins: bool = False, chain_links: int = 2,
                 chain_via_max: int = 50, join_piece_min_size: int = PieceCheck.min_size,
                 join_piece_min_signal: float = PieceCheck.min_signal,
                 join_piece_skip_small_tree: bool = PieceCheck.skip_small_tree,
                 thresholds: Mapping[str, float] | None = None) -> None:
        self.judge = with_thresholds(_load_judge(judge), thresholds)
        self.chain_joins, self.chain_links, self.chain_via_max = bool(chain_joins), int(chain_links), int(chain_via_max)
        self.group_noise = bool(group_noise)
        self.noise_span = tuple(int(v) for v in noise_span)
        self.settings = CandidateSettings(reach_um=reach_um, join_min_size=join_min_size,
                                          prune_min_piece=prune_min_piece, prune_min_um=prune_min_um)
        self.prune = bool(prune)
        self.join_signal_min, self.join_max_crowding = float(join_signal_min), float(join_max_crowding)
        self.piece = PieceCheck(int(join_piece_min_size), float(join_piece_min_signal),
                                bool(join_piece_skip_small_tree))
        self.refused: list[dict] = []   # joins the piece check turned down in the last inspection (the trace's)

    def gate(self, c: Candidate) -> bool:
        if not join_gate(c, self.join_signal_min, self.join_max_crowding, self.settings.reach_um, piece=None):
            return False
        if not self.piece.passes(c):
            self.refused.append(self.piece.describe(c))
            return False
        return True

    def chosen(self, image: np.ndarray, mask: np.ndarray, spacing: Sequence[float],
               root: Sequence[float] | None = None, inputs: Sequence[str] = ALL_INPUTS,
               blocks: Sequence[Block] = ()) -> list[tuple[Candidate, float]]:
        """The candidates the judge and the gates pass; joins grow the piece at ``root`` (ZYX voxels) when
        given, else the largest piece. ``inputs`` without ``betti0``: only the candidates the xy MIP (whole, or
        cut into ``blocks``' tiles) shows."""
        kinds = ("join", "remove", "prune") if self.prune else ("join", "remove")
        found = find_candidates(image, mask, spacing, self.settings, kinds, root)
        cands = found.candidates
        view = (CropView(image, mask, tuple(float(v) for v in spacing), found.levels)  # type: ignore[arg-type]
                if self.judge.uses_crops else None)
        p, passed = self.judge.decide(cands, view)
        seen = visible(cands, found.labels, blocks, inputs)
        self.refused = []
        chosen = choose(cands, p, passed & seen, self.prune, self.gate)
        if not self.chain_joins:
            return chosen
        from neurorefiner.agents.learned.chains import with_chains

        chained = with_chains(found, chosen, self.judge, self.gate, view, self.chain_links, self.chain_via_max)
        if "betti0" in inputs:
            return chained
        keep = visible([c for c, _ in chained], found.labels, blocks, inputs)
        return [cp for cp, k in zip(chained, keep, strict=True) if k]

    def inspect(self, view: GlobalView) -> Inspection:
        t0 = time.perf_counter()
        grouped: dict[int, list[Defect]] = {}
        chosen = self.chosen(np.asarray(view.image, np.float32), np.asarray(view.mask, bool), view.spacing,
                             view.root, view.inputs, view.blocks)
        for c, p in chosen:
            where = np.asarray(c.anchors, float).mean(axis=0) if c.kind != "prune" else np.asarray(c.anchors[0], float)
            z, y, x = (int(round(v)) for v in where)
            block = block_of_point(view.blocks, (min(max(z, 0), view.mask.shape[0] - 1), y, x))
            if block is not None:
                grouped.setdefault(block.id, []).append(_defect(c, p))
        flags = {}
        for bid, ds in grouped.items():
            if self.group_noise:
                ds = group_noise(ds, self.noise_span)
            kind = "FN" if any(d.kind == "FN" for d in ds) else "FP"
            counts = {k: sum(d.kind == k for d in ds) for k in ("FN", "FP", ATTACHED)}
            flags[bid] = Flag(bid, kind, tuple(ds), f"{counts['FN']} join(s), {counts['FP']} removal(s), "
                                                    f"{counts[ATTACHED]} attached branch(es) the judge passed")
        raw: dict = {"candidates_chosen": len(chosen), "blocks": len(flags)}
        if self.refused:   # the judge and the gap passed them; their large far piece is dimmer than the tree
            raw["joins_refused_for_their_piece"] = list(self.refused)
        info = CallInfo(self.name, seconds=time.perf_counter() - t0, raw=raw)
        return Inspection(flags, info)


class LearnedValidator(HeuristicValidator):
    """The heuristic checks; for an attached branch (which the judge flagged): the cut must lie at the named
    place, remove rather than add, and leave no more large pieces than before (never split the tree)."""

    name = "learned"

    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict:
        if defect.kind != ATTACHED:
            return super().validate(ctx, flag, defect, advice, before, after, step)
        return self._validate_cut(ctx, defect, advice, np.asarray(before, bool), np.asarray(after, bool))

    def _validate_cut(self, ctx: BlockContext, defect: Defect, advice: Advice, before: np.ndarray,
                      after: np.ndarray) -> Verdict:
        from neurorefiner.topology.components import label_components

        t0 = time.perf_counter()
        checks: dict = {}

        def verdict(ok: bool, why: str) -> Verdict:
            return Verdict(ok, why, CallInfo(self.name, seconds=time.perf_counter() - t0), checks)

        added, removed = int((after & ~before).sum()), int((before & ~after).sum())
        checks.update(added=added, removed=removed)
        if removed == 0:
            return verdict(False, "not compliant: the cut removed nothing")
        if added > self.max_wrong_sign * (added + removed):
            return verdict(False, f"not compliant: a removal added {added} voxels")
        labels, n_before, sizes = ctx.components()
        region_after = ctx.mask.copy()
        region_after[advice.frame.window] = after
        lab_a, n_after = label_components(region_after)
        big_before = int((sizes[1:] >= self.large_size).sum())
        sizes_a = np.bincount(lab_a.ravel(), minlength=n_after + 1)
        big_after = int((sizes_a[1:] >= self.large_size).sum())
        checks.update(components_before=n_before, components_after=n_after, large_before=big_before,
                      large_after=big_after)
        if big_after > big_before:
            return verdict(False, f"topology worse: the cut split a large structure ({big_before} -> {big_after})")
        share = float(((after != before) & self._allowed(advice)).sum()) / max(added + removed, 1)
        checks["inside"] = round(share, 3)
        if share < self.min_inside:
            return verdict(False, f"not compliant: only {share:.0%} of the cut is at the named place")
        return verdict(True, f"attached branch cut: -{removed} voxels, the structure stays one piece")
