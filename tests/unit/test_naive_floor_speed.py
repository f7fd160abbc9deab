"""The naive floor's TEASAR must stay affordable on noisy stacks.

On the SYNTHETIC presets Otsu splits the background noise, leaving one 26-connected sponge of ~40% of the
volume; kimimaro's per-path ``fix_branching`` then ran over 10 minutes per stack (one Dijkstra search per
path, ~7,400 paths). ``teasar_tree`` switches it off above ``FIX_BRANCHING_MAX_VOXELS`` and keeps it (and
so the DIADEM figures) on small real components. The kimimaro call is spied on, so the slow case is checked
without running it.
"""

from __future__ import annotations

import numpy as np
import pytest

kimimaro = pytest.importorskip("kimimaro")

from neurorefiner.baselines.naive import (  # noqa: E402
    FIX_BRANCHING_MAX_VOXELS,
    teasar_tree,
    use_fix_branching,
)


def sponge(shape: tuple[int, int, int], fill: float = 0.4, seed: int = 0) -> np.ndarray:
    """Smoothed noise above its (1 - fill) quantile: what Otsu leaves of a noisy synthetic stack."""
    from scipy.ndimage import gaussian_filter

    noise = gaussian_filter(np.random.default_rng(seed).normal(size=shape).astype(np.float32), 1.0)
    return noise > np.quantile(noise, 1.0 - fill)


def y_tube(shape: tuple[int, int, int] = (20, 60, 60)) -> np.ndarray:
    """A thin Y (stem + two branches), the size of a DIADEM Otsu component or smaller."""
    m = np.zeros(shape, dtype=bool)
    z = shape[0] // 2
    m[z - 1:z + 2, 5:31, 29:32] = True  # stem along y
    for i in range(25):
        m[z - 1:z + 2, 30 + i:32 + i, 30 + i:33 + i] = True  # branch to +x
        m[z - 1:z + 2, 30 + i:32 + i, 30 - i - 2:30 - i + 1] = True  # branch to -x
    return m


@pytest.fixture
def spy(monkeypatch):
    """Record kimimaro.skeletonize's keyword arguments; ``run=False`` skips the (slow) skeletonisation."""
    calls: list[dict] = []
    real = kimimaro.skeletonize
    state = {"run": True}

    def fake(labels, **kw):
        calls.append({"fix_branching": kw.get("fix_branching"), "max_label_voxels": int(
            np.bincount(np.asarray(labels).ravel())[1:].max())})
        return real(labels, **kw) if state["run"] else {}

    monkeypatch.setattr(kimimaro, "skeletonize", fake)
    return calls, state


def test_bound_separates_real_components_from_noise_sponges():
    # DIADEM's largest Otsu component holds ~31k voxels; the synthetic sponges 5-13M
    assert use_fix_branching(31_445)
    assert not use_fix_branching(5_000_000)
    assert use_fix_branching(10**9, max_voxels=None)
    assert use_fix_branching(FIX_BRANCHING_MAX_VOXELS) and not use_fix_branching(FIX_BRANCHING_MAX_VOXELS + 1)


def test_sponge_shaped_like_the_slow_case_skips_per_path_searches(spy):
    calls, state = spy
    state["run"] = False  # the real call here took minutes with fix_branching on
    m = sponge((96, 128, 128))  # ~630k voxels; scaled down, so the bound is scaled with it
    for largest in (True, False):
        teasar_tree(m, (1.0, 0.2, 0.2), largest_only=largest, fix_branching_max_voxels=100_000)
    assert [c["fix_branching"] for c in calls] == [False, False]
    assert calls[0]["max_label_voxels"] > 100_000
    # and at full size (a 256^3 stack, ~40% filled) the default bound takes the fast path
    calls.clear()
    teasar_tree(sponge((256, 128, 128)), (1.0, 0.2, 0.2))
    assert calls[0]["max_label_voxels"] > FIX_BRANCHING_MAX_VOXELS and calls[0]["fix_branching"] is False


def test_small_real_sized_components_keep_fix_branching_and_the_same_skeleton(spy):
    calls, _ = spy
    m = y_tube()
    default = teasar_tree(m, (1.0, 0.33, 0.33))
    always = teasar_tree(m, (1.0, 0.33, 0.33), fix_branching_max_voxels=None)
    assert [c["fix_branching"] for c in calls] == [True, True]
    assert len(default.ids) > 10
    np.testing.assert_array_equal(default.xyz, always.xyz)
    np.testing.assert_array_equal(default.parents, always.parents)


def test_fast_path_skeleton_is_close_to_the_fix_branching_one():
    """Without fix_branching only where branches leave the trunk moves: the same voxels are covered."""
    m = y_tube()
    slow = teasar_tree(m, (1.0, 0.33, 0.33), fix_branching_max_voxels=None)
    fast = teasar_tree(m, (1.0, 0.33, 0.33), fix_branching_max_voxels=0)
    assert abs(len(fast.ids) - len(slow.ids)) <= 0.2 * len(slow.ids)
    from scipy.spatial import cKDTree

    d_fs, _ = cKDTree(slow.zyx).query(fast.zyx)
    d_sf, _ = cKDTree(fast.zyx).query(slow.zyx)
    assert d_fs.max() <= 3.0 and d_sf.max() <= 3.0


def test_fast_path_covers_a_noise_sponge_inside_the_mask():
    m = sponge((32, 48, 48))
    tree = teasar_tree(m, (1.0, 0.2, 0.2), fix_branching_max_voxels=0)
    assert len(tree.ids) > 100
    idx = np.round(tree.zyx).astype(int)
    assert m[idx[:, 0], idx[:, 1], idx[:, 2]].all()
    assert len(tree.roots()) >= 1
