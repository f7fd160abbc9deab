"""APP2: known answers on small hand-built masks and images, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.io.swc import Tree
from neurorefiner.metrics import score_trees
from neurorefiner.tracing.app2 import app2, to_uint8, trace_mask


def line_mask(shape=(9, 40, 80), y=20, z=4, x0=5, x1=75, r=1):
    m = np.zeros(shape, bool)
    m[z - r:z + r + 1, y - r:y + r + 1, x0:x1 + 1] = True
    return m


def y_mask():
    """A trunk along x with two branches leaving at x = 40 (up and down in y), 3 voxels thick."""
    m = np.zeros((7, 80, 90), bool)
    m[2:5, 39:42, 5:41] = True
    for k in range(35):
        m[2:5, 40 + k - 1:40 + k + 2, 40 + k - 1:40 + k + 2] = True
        m[2:5, 40 - k - 1:40 - k + 2, 40 + k - 1:40 + k + 2] = True
    return m


def y_tree() -> Tree:
    pts = [(3, 40, x) for x in range(5, 41)]
    par = list(range(-1, len(pts) - 1))
    for sign in (1, -1):
        start = len(pts)
        for k in range(1, 35):
            pts.append((3, 40 + sign * k, 40 + k))
            par.append(35 if k == 1 else start + k - 2)
    return Tree.from_points(np.array(pts, float), np.array(par))


def test_line_is_one_path_from_end_to_end():
    t = trace_mask(line_mask())
    assert len(t) > 2
    assert int((t.n_children() > 1).sum()) == 0  # no spurious branches on a clean tube
    x = t.xyz[:, 0]
    assert x.min() <= 7 and x.max() >= 73
    assert np.allclose(t.xyz[:, 1], 20, atol=1.0) and np.allclose(t.xyz[:, 2], 4, atol=1.0)
    gold = Tree.from_points(np.array([[4, 20, 5], [4, 20, 75]], float), np.array([-1, 0]))
    s = score_trees(gold, t)
    assert s["F1"] == 1.0 and s["SD"] < 1.0


def test_y_shape_has_one_branch_point_and_matches_gold():
    t = trace_mask(y_mask(), marker=(5, 40, 3))  # rooted at the trunk's end
    degree = t.n_children() + (t.parent_index >= 0)
    assert int((degree >= 3).sum()) == 1  # one junction, no spurs
    assert int((degree == 1).sum()) == 3  # three ends
    s = score_trees(y_tree(), t)
    assert s["F1"] >= 0.95 and s["SD"] <= 1.0
    # rooted at the distance-transform maximum (a branch end here): on a uniform mask a second path may run
    # beside the first inside the 5-voxel-wide diagonal band, as in APP2; still within tau everywhere
    s = score_trees(y_tree(), trace_mask(y_mask()))
    assert s["F1"] >= 0.95 and s["SD"] <= 2.0


def test_zero_one_uint8_mask_is_scaled_not_background():
    m = line_mask().astype(np.uint8)  # 0/1
    assert to_uint8(m).max() == 255
    assert len(app2(m)) > 0
    assert len(app2(m, is_mask=False)) == 0  # read as an image, 1 <= bkg_thresh 10: all background


def test_empty_and_single_voxel_masks_give_empty_trees():
    assert len(trace_mask(np.zeros((5, 6, 7), bool))) == 0
    m = np.zeros((5, 6, 7), bool)
    m[2, 3, 3] = True
    assert len(trace_mask(m)) == 0  # shorter than length_thresh: pruned, no crash
    assert len(trace_mask(m, length_thresh=0.5)) == 0  # APP2 drops single-node segments (happ)


def test_only_the_roots_component_is_traced_unless_all_components():
    m = line_mask()
    m[:, :, 40:43] = False  # a 3-voxel break
    left = trace_mask(m, marker=(10, 20, 4))
    assert left.xyz[:, 0].max() < 41
    both = trace_mask(m, marker=(10, 20, 4), all_components=True)
    assert both.xyz[:, 0].max() > 70 and len(both.roots()) == 2


def test_break_accept_crosses_a_one_voxel_gap():
    m = line_mask()
    m[:, :, 40] = False
    assert trace_mask(m, marker=(10, 20, 4)).xyz[:, 0].max() < 41
    crossed = trace_mask(m, marker=(10, 20, 4), is_break_accept=True)
    assert crossed.xyz[:, 0].max() > 70 and len(crossed.roots()) == 1


def test_marker_is_the_root():
    t = trace_mask(line_mask(), marker=(70, 20, 4))
    root = t.xyz[t.roots()[0]]
    assert np.allclose(root, (70, 20, 4))


def test_connectivity_types():
    m = np.zeros((3, 30, 30), bool)
    for k in range(25):
        m[1, 2 + k, 2 + k] = True  # a diagonal: 8-connected in-plane only
    assert len(trace_mask(m, cnn_type=1)) == 0  # 6-neighbours: isolated voxels
    t = trace_mask(m, cnn_type=2)
    assert np.ptp(t.xyz[:, 0]) >= 20


def test_anisotropic_spacing_measures_physical_length():
    m = np.zeros((30, 9, 9), bool)
    m[2:28, 3:6, 3:6] = True  # along z
    t = trace_mask(m, (3.0, 1.0, 1.0), resample_step=None)
    assert np.ptp(t.xyz[:, 2]) >= 22
    assert t.total_length((3.0, 1.0, 1.0)) == pytest.approx(3.0 * np.ptp(t.xyz[:, 2]), rel=0.1)


def test_short_side_spur_is_pruned():
    m = line_mask()
    m[4, 22:24, 40] = True  # 2-voxel bump
    t = trace_mask(m)
    assert int((t.n_children() > 1).sum()) == 0


def test_grey_image_with_auto_threshold_and_gsdt():
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 30, size=(9, 40, 80)).astype(np.float32)
    img[line_mask()] = 200.0
    gold = Tree.from_points(np.array([[4, 20, 5], [4, 20, 75]], float), np.array([-1, 0]))
    for kw in ({"bkg_thresh": 60}, {"bkg_thresh": "auto"}, {"bkg_thresh": 60, "is_gsdt": True}):
        t = app2(img, **kw)
        assert score_trees(gold, t)["REC"] > 0.9, kw


def test_downsampling_maps_back_to_full_resolution():
    m = np.zeros((4, 300, 300), bool)
    m[1:3, 149:152, 10:290] = True
    t = trace_mask(m, downsample=True)
    assert t.xyz[:, 0].min() < 20 and t.xyz[:, 0].max() > 280
    assert np.allclose(t.xyz[:, 1], 150, atol=2.0)


@pytest.mark.parametrize("kw", [{"cnn_type": 4}, {"bkg_thresh": "bright"}, {"marker": (500, 1, 1)},
                                {"spacing": (1.0, 0.0, 1.0)}, {"length_thresh": -1}])
def test_bad_arguments_raise_value_error(kw):
    with pytest.raises(ValueError):
        app2(line_mask(), **kw)


def test_not_3d_raises():
    with pytest.raises(ValueError, match="3D"):
        app2(np.zeros((5, 5), bool))


def test_volume_spacing_is_used():
    from neurorefiner.io import Volume

    vol = Volume(line_mask(), spacing=(2.0, 1.0, 1.0))
    t = app2(vol)
    assert "spacing_zyx=(2.0, 1.0, 1.0)" in t.comments[0]
