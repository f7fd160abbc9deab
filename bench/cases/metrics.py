"""Scoring speed: two trees of 10,000 nodes each (target: under 1 s), with a lower bound for
reference: one KD-tree nearest-node query each way between the raw node sets."""

from __future__ import annotations

import numpy as np

from bench.core import Case


def _trees():
    from neurorefiner.io.swc import Tree

    rng = np.random.default_rng(0)
    out = []
    for seed in (0, 1):
        n = 10_000
        r = np.random.default_rng(seed)
        par = np.concatenate([[-1], [int(r.integers(max(0, i - 5), i)) for i in range(1, n)]])
        steps = r.normal(size=(n, 3)) * 1.5
        pos = np.zeros((n, 3))
        for i in range(1, n):
            pos[i] = pos[par[i]] + steps[i]
        out.append(Tree.from_points(pos + 300, par))
    out[1] = out[0].offset(rng.normal(size=3))  # a near copy: realistic matching work
    return out


def _score(arg):
    from neurorefiner.metrics.reconstruction import score_trees

    return score_trees(arg[0], arg[1])


def _kd_lower_bound(arg):
    from scipy.spatial import cKDTree

    a, b = arg
    cKDTree(b.xyz).query(a.xyz)
    cKDTree(a.xyz).query(b.xyz)


CASES = [
    Case("metrics/score_trees_10k_nodes", _trees, _score, reference=_kd_lower_bound,
         reference_name="node-to-node KD query", repeats=3, budget_s=1.0),
]
