"""Classical's bridges, judged: the plain refiner's own moves, each kept only where the judge rates it.

Why: on the stand-ins the classical refiner (drop specks, bridge every piece within reach to the root's piece,
chains over three passes) beat the learned loop on validation, yet loses whole volumes to one bridge that
attaches a bright false piece. Vetoing classical's bridges with the judge keeps everything classical does
well (its chains, its reach, its brightest paths) and lets the learned part remove what it gets wrong. With a
threshold of zero it is classical exactly, so the choose step (:mod:`neurorefiner.adaptation.choose`) measures
what the veto adds instead of assuming it.

How: at the start of each of classical's passes the join candidates of the mask as it stands are found (the
tree is the piece at the root, as classical's) and scored once; each bridge of the pass is then the candidate
that attaches the same piece. A piece whose candidate the judge rates under the threshold is never joined. A
bridge to a piece that joined the tree earlier in the same pass has no candidate yet: it is put off to the next
pass, where it has one. A piece too small to end a candidate keeps classical's move.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neurorefiner.baselines.classical import BridgeVerdict, JoinJudgement


def judged_bridges(judge: Any, image: np.ndarray, spacing: Sequence[float], threshold: float, reach_um: float,
                   root: Sequence[float] | None = None) -> JoinJudgement:
    """The ``judged`` argument of :func:`~neurorefiner.baselines.classical.classical_refine`: bridges whose
    candidate the judge rates at least ``threshold`` (``reach_um``: the longest join looked for, at least
    classical's own reach, so that each of its bridges has a candidate)."""
    from neurorefiner.agents.candidates import CandidateSettings, find_candidates
    from neurorefiner.agents.learned.judge import CropView

    settings = CandidateSettings(reach_um=float(reach_um))

    def at(mask: np.ndarray) -> BridgeVerdict:
        found = find_candidates(image, mask, spacing, settings, kinds=("join",), root=root)
        joins = found.candidates
        view = CropView(image, mask, tuple(float(v) for v in spacing), found.levels) if judge.uses_crops else None
        p = judge.probabilities(joins, view) if joins else np.zeros(0)
        rated: dict[int, float] = {}
        for c, pi in zip(joins, p):
            rated[int(c.pieces[0])] = max(rated.get(int(c.pieces[0]), 0.0), float(pi))
        labels, main = found.labels, found.main

        def verdict(a: np.ndarray, b: np.ndarray) -> bool | None:
            piece = int(labels[tuple(int(v) for v in a)])
            if piece in rated:
                return rated[piece] >= threshold
            return True if int(labels[tuple(int(v) for v in b)]) == main else None

        return verdict

    return at


def classical_reach_um(max_gap: float, spacing: Sequence[float]) -> float:
    """Classical's reach (``max_gap`` voxels of the finest axis) in micrometres, plus one voxel diagonal so a
    bridge at the limit still has its candidate."""
    sp = np.asarray(spacing, float)
    return float(max_gap * sp.min() + np.linalg.norm(sp))


def judged_classical(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float], judge: Any, threshold: float,
                     root: Sequence[float] | None = None, **classical: Any) -> np.ndarray:
    """The classical refiner (``classical``: its settings, as ``conf/method/classical.yaml`` names them) with
    each bridge made only where ``judge`` rates it at least ``threshold``: what a refiner's plan of kind
    ``classical`` with a ``join_veto`` runs, in the choose step and in ``refine.py`` alike."""
    from neurorefiner.baselines.classical import classical_refine

    if threshold <= 0:   # nothing vetoed: classical itself, with no candidates looked for
        return classical_refine(image, mask, spacing, root=root, **classical)
    reach = classical_reach_um(float(classical.get("max_gap", 10.0)), spacing)
    judged = judged_bridges(judge, image, spacing, threshold, reach, root)
    return classical_refine(image, mask, spacing, root=root, judged=judged, **classical)
