"""Blocks, Betti-0 and the pictures the agents see."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.topology.blocks import (
    all_block_stats,
    betti0,
    block_of_point,
    centred_window,
    expand,
    grid_blocks,
    label_components,
)
from neurorefiner.topology.views import (
    block_views,
    change_png,
    depth_coded_mip,
    global_mask_png,
    pair_png,
    xy_view,
    yz_view,
)

PNG = b"\x89PNG\r\n\x1a\n"


def test_grid_covers_the_volume_once_with_smaller_edge_blocks() -> None:
    blocks = grid_blocks((10, 300, 200), 128)
    assert [b.id for b in blocks] == list(range(6))
    cover = np.zeros((10, 300, 200), np.int32)
    for b in blocks:
        cover[b.slices] += 1
    assert (cover == 1).all()
    assert blocks[-1].shape == (10, 300 - 256, 200 - 128)
    assert block_of_point(blocks, (3, 299, 199)).id == 5


def test_depth_chunks() -> None:
    blocks = grid_blocks((70, 64, 64), 64, depth=32)
    assert [b.shape[0] for b in blocks] == [32, 32, 6]


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_block_size(bad: int) -> None:
    with pytest.raises(ValueError):
        grid_blocks((4, 8, 8), bad)


def test_betti0_is_26_connected_and_counts_per_block() -> None:
    m = np.zeros((8, 16, 16), bool)
    m[2, 2, 2] = m[3, 3, 3] = True   # diagonal neighbours: one component
    m[5, 10, 10] = True
    assert betti0(m) == 2
    labels, n = label_components(m)
    stats = all_block_stats(m, grid_blocks(m.shape, 8), labels)
    assert [s.betti0 for s in stats] == [1, 0, 0, 1]
    assert stats[0].component_sizes == (2,)


def test_windows_stay_inside() -> None:
    w = centred_window((0, 5, 95), (32, 64, 64), (20, 100, 100))
    assert [(s.start, s.stop) for s in w] == [(0, 20), (0, 64), (36, 100)]
    e = expand((slice(0, 4), slice(10, 20), slice(90, 100)), 8, (4, 100, 100))
    assert [(s.start, s.stop) for s in e] == [(0, 4), (2, 28), (82, 100)]


def test_views_and_pngs() -> None:
    vol = np.zeros((6, 20, 30), np.float32)
    vol[1, 4, 7] = 1.0
    assert xy_view(vol).shape == (20, 30) and xy_view(vol)[4, 7] == 1
    assert yz_view(vol).shape == (20, 6) and yz_view(vol)[4, 1] == 1   # front (z = 0) on the left
    rgb = depth_coded_mip(vol)
    assert rgb.shape == (20, 30, 3) and rgb[4, 7].any() and not rgb[0, 0].any()
    mask = vol > 0
    blocks = grid_blocks(mask.shape, 16)
    assert global_mask_png(mask, blocks, highlight=[1]).startswith(PNG)
    assert global_mask_png(mask, blocks, depth_coded=True).startswith(PNG)
    views = block_views(vol, mask)
    assert set(views) == {"image_xy", "mask_xy", "image_yz", "mask_yz"}
    assert all(v.startswith(PNG) for v in views.values())
    assert pair_png(vol, mask).startswith(PNG)
    assert change_png(mask, ~mask).startswith(PNG)
