"""Reconstruction and voxel metrics against answers computed by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from neurorefiner.io.swc import Tree
from neurorefiner.metrics import score_mask, score_trees
from neurorefiner.metrics.reconstruction import TreeDistance, _segments, resample_points
from neurorefiner.metrics.voxel import betti_errors, betti_numbers, cldice, dice, euler_characteristic


def line(n=51, step=2.0) -> Tree:
    """Nodes every 2 voxels along x: length 100."""
    zyx = np.stack([np.zeros(n), np.zeros(n), np.arange(n) * step], 1)
    return Tree.from_points(zyx, np.arange(n) - 1)


def line_with_branch() -> Tree:
    """The line plus a 40-voxel branch along y from x = 50 (20 nodes, 2 apart)."""
    base = line()
    br = np.stack([np.zeros(20), np.arange(1, 21) * 2.0, np.full(20, 50.0)], 1)
    zyx = np.concatenate([base.zyx, br])
    par = np.concatenate([np.arange(51) - 1, [25], 51 + np.arange(19)])
    return Tree.from_points(zyx, par)


def test_identical_trees():
    s = score_trees(line_with_branch(), line_with_branch())
    assert s == {"SD": 0.0, "SSD": 0.0, "pSSD": 0.0, "PRE": 1.0, "REC": 1.0, "F1": 1.0, "MES": 1.0}


def test_shift_by_three_voxels():
    g = line_with_branch()
    s = score_trees(g, g.offset((0.0, 0.0, 3.0)))  # along z: perpendicular to every edge
    assert s["SD"] == pytest.approx(3.0) and s["SSD"] == pytest.approx(3.0) and s["pSSD"] == 1.0
    assert s["F1"] == 1.0  # within tau = 4
    far = score_trees(g, g.offset((0.0, 0.0, 5.0)))
    assert far["F1"] == 0.0 and far["MES"] == 0.0


def test_missing_branch_known_recall_mes_and_distances():
    # resampled at 2: gold has 51 + 20 points; branch points at y = 2, 4 are within tau = 4 of the line,
    # y = 6..40 (18 points) are missed.
    s = score_trees(line_with_branch(), line())
    assert s["PRE"] == 1.0
    assert s["REC"] == pytest.approx(53 / 71)
    assert s["MES"] == pytest.approx(53 / 71)
    assert s["F1"] == pytest.approx(2 * (53 / 71) / (1 + 53 / 71))
    # V3D sampling: 3 points per 2-voxel edge (ends included). Gold->pred: 150 line samples at 0, branch edge
    # k (k = 1..20) gives distances 2k, 2k-1, 2k-2: sum 1200 over 210 samples; pred->gold: 0.
    assert s["SD"] == pytest.approx(1200 / 210 / 2)
    # SSD: only gold->pred has samples >= 2 (58 of them, sum 1199): V3D takes that direction alone
    assert s["SSD"] == pytest.approx(1199 / 58)
    assert s["pSSD"] == pytest.approx(58 / 210 / 2)


def test_extra_branch_known_precision_and_mes():
    s = score_trees(line(), line_with_branch())
    assert s["REC"] == 1.0
    assert s["PRE"] == pytest.approx(53 / 71)
    assert s["MES"] == pytest.approx(51 / (51 + 18))


def test_empty_prediction_scores_zero_not_nan():
    for g, p in ((line(), Tree.empty()), (Tree.empty(), line()), (Tree.empty(), Tree.empty())):
        s = score_trees(g, p)
        assert s["F1"] == 0.0 and s["PRE"] == 0.0 and s["REC"] == 0.0 and s["MES"] == 0.0
        assert math.isinf(s["SD"]) and math.isinf(s["SSD"]) and s["pSSD"] == 1.0
        assert not any(math.isnan(v) for v in s.values())


def test_single_node_trees():
    one = Tree.from_points(np.array([[0.0, 0.0, 0.0]]), np.array([-1]))
    far = one.offset((3.0, 0.0, 0.0))
    s = score_trees(one, far)
    assert s["SD"] == pytest.approx(3.0) and s["F1"] == 1.0
    s = score_trees(line(), one)
    assert s["PRE"] == 1.0 and 0 < s["REC"] < 0.1


def test_physical_units_use_spacing():
    g = line()
    s = score_trees(g, g.offset((0.0, 0.0, 3.0)), (2.0, 1.0, 1.0), physical=True, tau=4.0)
    assert s["SD"] == pytest.approx(6.0)
    assert s["F1"] == 0.0  # 6 um > tau = 4 um


def test_units_mismatch_warns():
    g = line()
    with pytest.warns(UserWarning, match="10x"):
        score_trees(g, g.scaled((0.05, 0.05, 0.05)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score_trees(g, g.offset((1.0, 0.0, 0.0)))


def test_bad_options():
    with pytest.raises(ValueError):
        score_trees(line(), line(), tau=0)
    with pytest.raises(ValueError):
        score_trees(line(), line(), step=-1)


def random_tree(n, seed):
    rng = np.random.default_rng(seed)
    par = np.array([-1] + [int(rng.integers(max(0, i - 4), i)) for i in range(1, n)])
    steps = rng.normal(size=(n, 3)) * 1.7
    pos = np.zeros((n, 3))
    for i in range(1, n):
        pos[i] = pos[par[i]] + steps[i]
    return Tree.from_points(pos, par)


def test_vectorised_resampling_matches_tree_resampled():
    for seed in range(3):
        t = random_tree(300, seed)
        for step in (0.7, 2.0, 5.0):
            a = np.sort(t.resampled(step).xyz, axis=0)
            b = np.sort(resample_points(t, t.xyz, step), axis=0)
            assert a.shape == b.shape and np.allclose(a, b)


def test_tree_distance_matches_brute_force():
    t = random_tree(200, 7)
    a, b = _segments(t, t.xyz)
    q = np.random.default_rng(1).uniform(t.xyz.min(0) - 5, t.xyz.max(0) + 5, size=(500, 3))
    ab = b - a
    l2 = np.maximum((ab * ab).sum(1), 1e-12)
    tt = np.clip(((q[:, None] - a[None]) * ab[None]).sum(-1) / l2[None], 0, 1)
    brute = np.linalg.norm(q[:, None] - (a[None] + tt[..., None] * ab[None]), axis=-1).min(1)
    assert np.allclose(TreeDistance(a, b)(q), brute, atol=1e-9)


# ---------------------------------------------------------------------------------------------- voxel
def ring():
    m = np.zeros((5, 9, 9), bool)
    m[2, 2:7, 2:7] = True
    m[2, 3:6, 3:6] = False
    return m


def test_betti_numbers_of_known_shapes():
    assert betti_numbers(ring()) == (1, 1, 0)
    shell = np.zeros((7, 7, 7), bool)
    shell[1:6, 1:6, 1:6] = True
    shell[2:5, 2:5, 2:5] = False
    assert betti_numbers(shell) == (1, 0, 1)
    two = np.zeros((5, 5, 5), bool)
    two[1, 1, 1] = two[3, 3, 3] = True  # corner-touching diagonal neighbours are not; these are apart
    assert betti_numbers(two) == (2, 0, 0)
    diag = np.zeros((3, 3, 3), bool)
    diag[0, 0, 0] = diag[1, 1, 1] = True  # 26-connected
    assert betti_numbers(diag)[0] == 1
    assert betti_numbers(np.zeros((3, 3, 3), bool)) == (0, 0, 0)


def test_euler_characteristic_matches_scikit_image():
    from skimage.measure import euler_number

    rng = np.random.default_rng(3)
    for _ in range(5):
        m = rng.random((12, 13, 11)) < 0.3
        assert euler_characteristic(m) == euler_number(m, connectivity=3)


def test_betti_errors_count_breaks_and_loops():
    g = ring()
    broken = g.copy()
    broken[2, 2, 4] = False  # opens the loop
    e = betti_errors(broken, g)
    assert e == {"betti0_error": 0.0, "betti1_error": 1.0}
    split = g.copy()
    split[2, 2, 4] = split[2, 6, 4] = False  # two pieces, no loop
    assert betti_errors(split, g) == {"betti0_error": 1.0, "betti1_error": 1.0}


def test_dice_and_cldice():
    m = ring()
    assert dice(m, m) == 1.0 and cldice(m, m) == pytest.approx(1.0)
    assert dice(m, np.zeros_like(m)) == 0.0 and cldice(m, np.zeros_like(m)) == 0.0
    assert dice(np.zeros_like(m), np.zeros_like(m)) == 1.0
    half = m.copy()
    half[:, :, 5:] = False
    assert 0 < dice(half, m) < 1
    with pytest.raises(ValueError):
        dice(m, m[:, :, :3])


def test_score_mask_traces_and_adds_voxel_metrics():
    m = np.zeros((9, 40, 80), bool)
    m[3:6, 19:22, 5:76] = True
    gold = Tree.from_points(np.array([[4, 20, 5], [4, 20, 75]], float), np.array([-1, 0]))
    s = score_mask(gold, m, (1.0, 1.0, 1.0), gold_mask=m, return_tree=True)
    assert s["F1"] == 1.0 and s["Dice"] == 1.0 and s["betti0_error"] == 0.0
    assert len(s["tree"]) > 0
    e = score_mask(gold, np.zeros_like(m), gold_mask=m)
    assert e["F1"] == 0.0 and e["Dice"] == 0.0 and e["betti0_error"] == 1.0
    with pytest.raises(ValueError, match="shape"):
        score_mask(gold, m, gold_mask=m[:, :, :10])
