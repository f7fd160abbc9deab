"""Position words <-> voxel sub-regions of a block (3 x 3 x 3 grid)."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.topology.positions import (
    Position,
    PositionError,
    all_positions,
    cell_index,
    cell_slices,
    locate,
    parse_position,
    region_mask,
)


@pytest.mark.parametrize("shape", [(32, 64, 64), (7, 10, 11), (3, 3, 3), (64, 128, 128), (5, 4, 100)])
def test_cells_tile_the_block_exactly(shape):
    count = np.zeros(shape, dtype=int)
    for p in all_positions():
        count[p.slices(shape)] += 1
    assert (count == 1).all()


def test_axis_conventions():
    shape = (30, 60, 90)  # z, y, x
    sz, sy, sx = Position("top", "left", "front").slices(shape)
    assert (sz, sy, sx) == (slice(0, 10), slice(0, 20), slice(0, 30))  # small z, small y, small x
    sz, sy, sx = Position("bottom", "right", "rear").slices(shape)
    assert (sz, sy, sx) == (slice(20, 30), slice(40, 60), slice(60, 90))
    sz, sy, sx = Position("center", "center", "center").slices(shape)
    assert (sz, sy, sx) == (slice(10, 20), slice(20, 40), slice(30, 60))
    # vertical runs along Y (rows), horizontal along X, depth along Z
    assert Position("bottom", "center", "center").slices(shape)[1] == slice(40, 60)
    assert Position("center", "right", "center").slices(shape)[2] == slice(60, 90)
    assert Position("center", "center", "rear").slices(shape)[0] == slice(20, 30)


def test_cell_round_trip_and_format():
    cells = set()
    for p in all_positions():
        assert Position.from_cell(p.cell) == p
        assert parse_position(p.format()) == p
        cells.add(p.cell)
    assert len(cells) == 27
    assert Position("top", "left", "rear").format() == "top-left-rear"
    assert str(Position("center", "right", "rear")) == "center-right-rear"


@pytest.mark.parametrize("text,expected", [
    ("top-left-rear", ("top", "left", "rear")),
    ("Top Left Rear", ("top", "left", "rear")),
    ("rear-top-left", ("top", "left", "rear")),
    ("right-center-rear", ("center", "right", "rear")),  # the paper's own order
    ("upper left posterior", ("top", "left", "rear")),
    ("lower_right_anterior", ("bottom", "right", "front")),
    ("middle", ("center", "center", "center")),
    ("centre-centre-back", ("center", "center", "rear")),
    ("top-left", ("top", "left", "center")),  # a missing axis is center
    ("left", ("center", "left", "center")),
])
def test_parse_position_tolerant(text, expected):
    assert parse_position(text) == Position(*expected)


@pytest.mark.parametrize("text", ["top-bottom-left", "left-right", "center-center-center-center",
                                  "top-sideways-rear", "", "top left rear front"])
def test_parse_position_rejects(text):
    with pytest.raises(PositionError):
        parse_position(text)


def test_from_cell_rejects_out_of_grid():
    with pytest.raises(PositionError):
        Position.from_cell((0, 3, 1))


def test_region_mask_hull_and_cells():
    shape = (9, 9, 9)
    a, b = Position("top", "left", "front"), Position("bottom", "left", "front")
    hull = region_mask(shape, [a, b])
    assert hull.sum() == 3 * 9 * 3  # full y range, one third in z and x
    cells = region_mask(shape, [a, b], hull=False)
    assert cells.sum() == 2 * 27 and (cells <= hull).all()
    assert region_mask(shape, []).sum() == 0
    with pytest.raises(ValueError):
        region_mask((0, 4, 4), [a])


def test_locate_mask_and_points():
    shape = (30, 60, 60)
    m = np.zeros(shape, bool)
    m[25:28, 5:10, 50:55] = True  # rear (z large), top (y small), right (x large)
    assert locate(m, shape) == Position("top", "right", "rear")
    pts = np.argwhere(m)
    assert locate(pts, shape) == Position("top", "right", "rear")


def test_locate_takes_the_cell_with_most_voxels():
    shape = (9, 9, 9)
    m = np.zeros(shape, bool)
    m[4, 4, 0:9] = True  # a line across three x cells, all at center z/y
    m[4, 4, 6:9] = True
    m[4, 3:6, 7] = True  # extra voxels in the right cell
    assert locate(m, shape) == Position("center", "right", "center")
    with pytest.raises(ValueError):
        locate(np.zeros(shape, bool), shape)
    with pytest.raises(ValueError):
        locate(np.zeros((4, 4, 4), bool), shape)


def test_cell_index_matches_slices():
    shape = (7, 10, 11)
    rng = np.random.default_rng(0)
    pts = np.stack([rng.integers(0, n, 200) for n in shape], axis=1)
    idx = cell_index(pts, shape)
    for p, c in zip(pts, idx, strict=True):
        sl = cell_slices(c, shape)
        assert all(s.start <= v < s.stop for s, v in zip(sl, p, strict=True))


def test_flip_mirrors_the_cell():
    p = Position("top", "left", "front")
    assert p.flipped([2]) == Position("top", "right", "front")
    assert p.flipped([1]) == Position("bottom", "left", "front")
    assert p.flipped([0]) == Position("top", "left", "rear")
    assert Position("center", "center", "center").flipped([0, 1, 2]) == Position()
    shape = (6, 9, 12)
    region = p.region(shape)
    assert (np.flip(region, axis=(0, 2)) == p.flipped([0, 2]).region(shape)).all()


def test_position_value_checks_and_canonical_words():
    assert Position("upper", "left", "posterior") == Position("top", "left", "rear")
    assert Position("centre", "middle", "back").format() == "center-center-rear"
    assert tuple(Position("top", "left", "rear")) == ("top", "left", "rear")
    assert len({Position("top"), Position("top", "center", "center")}) == 1  # hashable value
    for bad in [("left", "left", "rear"), ("top", "top", "rear"), ("top", "left", "up"), (1, "left", "rear")]:
        with pytest.raises(PositionError):
            Position(*bad)
