"""The heuristic Change Validator: accept an edit only if it complied AND topology improved.

Compliance (the paper's "instruction adherence"): the edit changed something; at least ``min_inside``
of the changed voxels lie in the place the instruction names (its cells grown by ``margin`` voxels, by
``connect_margin`` for a connect/repair: the editor looks for a break's ends a few voxels beyond the named
cells and paints the bridge as a tube of the neurite's radius, so a bridge it may paint is at the place);
the sign is right (connect/repair mostly add, remove mostly deletes).

Topology (the paper's "topological improvement"), counted on the block's region (block + halo) so a
piece that continues outside the block is not mistaken for a loose end: a connect/repair must leave
fewer components (and join the two named ends when the Inspector gave them); a remove must leave fewer
components or take at least half of the named piece; and no edit may delete more than
``max_large_loss`` voxels of a component of ``large_size`` voxels or more (the tree itself).
"""

from __future__ import annotations

import time

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.agents.roles import Advice, BlockContext, CallInfo, Defect, Flag, Step, Verdict
from neurorefiner.inference.decoding import grow
from neurorefiner.topology.blocks import label_components


class HeuristicValidator:
    """Deterministic Validator over the block's region before and after the edit."""

    name = "heuristic"

    def __init__(self, margin: int = 4, min_inside: float = 0.9, max_wrong_sign: float = 0.2,
                 large_size: int = 300, max_large_loss: int = 10, min_removed_share: float = 0.5,
                 connect_margin: int | None = None) -> None:
        if not 0.0 <= min_inside <= 1.0 or not 0.0 <= max_wrong_sign <= 1.0:
            raise ValueError("min_inside and max_wrong_sign are shares in [0, 1]")
        self.margin, self.min_inside, self.max_wrong_sign = int(margin), float(min_inside), float(max_wrong_sign)
        self.connect_margin = self.margin if connect_margin is None else int(connect_margin)
        self.large_size, self.max_large_loss = int(large_size), int(max_large_loss)
        self.min_removed_share = float(min_removed_share)

    def _allowed(self, advice: Advice) -> np.ndarray:
        frame = advice.frame
        region = advice.instruction.region(frame.shape)
        if advice.instruction.op in ("connect", "repair"):
            region = grow(region, self.connect_margin)   # the editor's own box growth
        elif self.margin > 0:
            region = ndi.binary_dilation(region, iterations=self.margin)
        return region[tuple(slice(a, n - b) for (a, b), n in zip(frame.pad, frame.shape))]

    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict:
        t0 = time.perf_counter()
        checks: dict = {}

        def verdict(accept: bool, reason: str) -> Verdict:
            return Verdict(accept, reason, CallInfo(self.name, seconds=time.perf_counter() - t0), checks)

        before, after = np.asarray(before, bool), np.asarray(after, bool)
        added, removed = int((after & ~before).sum()), int((before & ~after).sum())
        changed = added + removed
        checks.update(added=added, removed=removed)
        if changed == 0:
            return verdict(False, "not compliant: the edit changed nothing")
        op = advice.instruction.op
        inside = float(((after != before) & self._allowed(advice)).sum()) / changed
        checks["inside"] = round(inside, 3)
        if inside < self.min_inside:
            return verdict(False, f"not compliant: only {inside:.0%} of the change is at the named place")
        wrong = removed if op in ("connect", "repair") else added
        if wrong > self.max_wrong_sign * changed:
            what = "deleted" if op in ("connect", "repair") else "added"
            return verdict(False, f"not compliant: a {op} {what} {wrong} of {changed} changed voxels")

        window = advice.frame.window
        region_after = ctx.mask.copy()
        region_after[window] = after
        lab_b, n_b, sizes = ctx.components()          # computed once per mask state, shared with the Advisor
        lab_a, n_a = label_components(region_after)
        checks.update(components_before=n_b, components_after=n_a)
        lost = ctx.mask[window] & ~after              # the edit changed nothing outside its window
        large_lost = int((sizes[lab_b[window][lost]] >= self.large_size).sum()) if lost.any() else 0
        checks["large_lost"] = large_lost
        if large_lost > self.max_large_loss:
            return verdict(False, f"topology worse: {large_lost} voxels of a large piece deleted")
        anchors = [tuple(int(v) for v in np.asarray(a) - ctx.origin) for a in defect.anchors]
        anchors = [a for a in anchors if all(0 <= v < n for v, n in zip(a, ctx.mask.shape))]
        if op in ("connect", "repair"):
            if n_a >= n_b:
                return verdict(False, f"topology not improved: {n_b} -> {n_a} components")
            if defect.kind == "FN" and len(anchors) >= 2:
                la, lb = lab_a[anchors[0]], lab_a[anchors[1]]
                checks["ends_joined"] = bool(la and la == lb)
                if not checks["ends_joined"]:
                    return verdict(False, f"topology not improved where asked: {n_b} -> {n_a} components but "
                                          "the two named ends are still apart")
            return verdict(True, f"joined: {n_b} -> {n_a} components, +{added} voxels at the named place")
        if n_a < n_b:
            return verdict(True, f"denoised: {n_b} -> {n_a} components, -{removed} voxels at the named place")
        if anchors and ctx.mask[anchors[0]]:
            piece = lab_b[anchors[0]]
            share = float(((lab_b[window] == piece) & ~after).sum()) / max(1, int(sizes[piece]))
            checks["target_removed"] = round(share, 3)
            if share >= self.min_removed_share:
                return verdict(True, f"denoised: {share:.0%} of the named piece removed")
        return verdict(False, f"topology not improved: {n_b} -> {n_a} components after the removal")
