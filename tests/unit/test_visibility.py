"""neurorefiner.synth.visibility: the per-segment contrast-to-noise measure and the renderer's floor
(labelled nodes too dim to see are brightened to the floor, never dropped from the label)."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.io.swc import Tree
from neurorefiner.synth.presets import PRESETS
from neurorefiner.synth.render import render
from neurorefiner.synth.visibility import floor_intensities, local_background_at, segment_ids, segment_visibility

SMALL = (48, 96, 96)


def _tiny(**changes):  # type: ignore[no-untyped-def]
    return PRESETS["tiny"].replace(shape=SMALL, min_length=60.0, **changes)


def test_local_background_ignores_the_excluded_voxels() -> None:
    rng = np.random.default_rng(0)
    bg = rng.normal(10.0, 2.0, (20, 40, 40)).astype(np.float32)
    exclude = np.zeros(bg.shape, bool)
    exclude[:, 18:22, :] = True
    bg[exclude] = 1000.0  # a bright structure that must not count as background
    mean, sd = local_background_at(np.array([[10.0, 20.0, 20.0]]), bg, exclude, (1.0, 1.0, 1.0), 9.0)
    assert mean[0] == pytest.approx(10.0, abs=0.5) and sd[0] == pytest.approx(2.0, abs=0.3)


def test_floor_raises_only_the_nodes_below_it() -> None:
    bg = np.full((16, 32, 32), 16.0, np.float32)  # flat: local sd 0, camera noise sqrt(16 + 3^2) = 5
    label = np.zeros(bg.shape, bool)
    pts = np.array([[8.0, 16.0, 10.0], [8.0, 16.0, 20.0]])
    out, info = floor_intensities(np.array([5.0, 40.0]), pts, bg, label, (1.0, 1.0, 1.0), 2.0, 3.0)
    assert out[0] == pytest.approx(10.0, rel=1e-3)  # 2 x 5
    assert out[1] == 40.0
    assert info["raised_fraction"] == 0.5
    same, info0 = floor_intensities(np.array([5.0, 40.0]), pts, bg, label, (1.0, 1.0, 1.0), 0.0, 3.0)
    assert same.tolist() == [5.0, 40.0] and info0["raised_fraction"] == 0.0


def test_segment_ids_split_at_branch_points() -> None:
    zyx = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 3], [0, 2, 4], [0, -1, 3]], float)
    tree = Tree.from_points(zyx, np.array([-1, 0, 1, 2, 3, 2]))
    seg = segment_ids(tree)
    assert seg[1] == seg[2]  # root to the fork
    assert seg[3] == seg[4] != seg[2]  # one child branch
    assert seg[5] not in (seg[2], seg[3])  # the other


def test_floor_brightens_dim_segments_and_keeps_the_label() -> None:
    """Same seed with and without a floor: the label and gold tree are identical (nothing dropped) and the
    dimmest segments become visible."""
    dim = dict(weak_rate=(3.0, 3.0), weak_length=(20.0, 40.0), weak_snr=(0.0, 0.3))
    p10_off, p10_on = [], []
    for seed in range(3):
        off = render(_tiny(**dim), seed)
        on = render(_tiny(visibility_floor=4.0, **dim), seed)
        assert np.array_equal(off.label, on.label) and len(off.gold) == len(on.gold)
        assert on.info["visibility"]["raised_fraction"] > 0
        p10_off.append(segment_visibility(off.image, off.label, off.gold, off.spacing).summary()["cnr_p10"])
        p10_on.append(segment_visibility(on.image, on.label, on.gold, on.spacing).summary()["cnr_p10"])
    assert np.mean(p10_on) > np.mean(p10_off) + 1.0
    assert min(p10_on) > 2.0


@pytest.mark.parametrize("name", [n for n in PRESETS if PRESETS[n].visibility_floor > 0])
def test_stand_in_presets_label_only_visible_neurites(name: str) -> None:
    """Every stand-in sets a floor; rendered small, at most a sliver of labelled length is under CNR 2."""
    p = PRESETS[name]
    r = render(p.replace(shape=SMALL, min_length=min(p.min_length, 60.0)), 0)
    s = segment_visibility(r.image, r.label, r.gold, r.spacing).summary()
    assert s["invisible_length_fraction"] <= 0.1, s

