"""The candidate search made cheaper at tile scale measures exactly what it measured before: the
piece sizes come from the same pass that gives the boxes (no second pass over the region), and the distance
of a removal's piece (and a join's end) to the tree from a KD-tree built for distances. Each is compared here
with the computation it replaced, on a mask of a fibre and many specks at all distances, at a spacing whose
products are not exact in binary (0.3 um)."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from neurorefiner.agents.candidates import CandidateSettings, find_candidates

SPACING = (1.0, 0.3, 0.3)


def _stack() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    mask = np.zeros((24, 160, 200), bool)
    mask[12, 80, 10:120] = True             # the tree, a fibre ...
    mask[8:16, 78:83, 60:64] = True         # ... with a blob on it
    mask[12, 20:79, 40] = True              # ... and a branch
    mask[12, 80, 124:180] = True            # a fibre past a break: a join
    for _ in range(150):                    # specks near and far
        z, y, x = (int(rng.integers(1, n - 3)) for n in mask.shape)
        mask[z:z + int(rng.integers(1, 3)), y:y + int(rng.integers(1, 4)), x:x + int(rng.integers(1, 3))] = True
    image = np.clip(rng.normal(0.1, 0.05, mask.shape) + 0.8 * mask, 0, 1).astype(np.float32)
    return image, mask


def test_sizes_and_distances_to_the_tree_are_what_the_plain_computations_give() -> None:
    image, mask = _stack()
    for settings in (None, CandidateSettings(joins_to_tree=False, reach_um=12.0)):
        found = find_candidates(image, mask, SPACING, settings)
        cx = found.context
        # sizes: what a bincount of the labels gives (int64, the background's zeroed)
        want = np.bincount(found.labels.ravel(), minlength=len(found.sizes))
        want[0] = 0
        assert found.sizes.dtype == np.int64 and np.array_equal(found.sizes, want)
        # distances: the nearest tree voxel's, as the balanced KD-tree of the tree's voxels gives them
        plain = cKDTree(cx.voxels(cx.main) * cx.sp)
        removals = found.of_kind("remove")
        joins = [c for c in found.of_kind("join") if c.pieces[0] != cx.main]
        assert len(removals) > 100 and joins
        for c in removals:
            d, _ = plain.query(c.voxels * cx.sp)
            assert c.features["dist_main_um"] == float(d.min())
        for c in joins:
            d, _ = plain.query(np.asarray(c.anchors[0], float) * cx.sp)
            assert c.features["small_dist_main_um"] == float(d)
        far = max(c.features["dist_main_um"] for c in removals)
        assert far > 20.0   # specks far from the tree: the queries the distance tree is for


def test_an_empty_mask_has_no_candidates_and_a_zero_size() -> None:
    found = find_candidates(np.zeros((4, 8, 8), np.float32), np.zeros((4, 8, 8), bool), SPACING)
    assert found.candidates == [] and found.sizes.tolist() == [0] and found.sizes.dtype == np.int64
