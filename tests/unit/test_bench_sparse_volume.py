"""The sparse whole-volume bench's building blocks (bench/sparse_volume.py): foreground put in a tile's core keeps
that tile, and only it, busy as the engine plans and skips tiles (so the volume's tile occupancy is what the case
says), and the projection's arithmetic: per-tile costs from a run, scaled to another volume and cluster."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.sparse_volume import TileCosts, core, place, projected_hours, task_seconds_for
from neurorefiner.refine.whole_volume.tiles import Occupancy, chunk_boxes, occupied, plan_tiles

# the bench's sparse volume on the default plan: 5 x 4 tiles of 256 x 512 x 512, halo 32 x 128 x 128, blocks of 128
SHAPE, TILE, HALO, ALIGN = (256, 2560, 2048), (256, 512, 512), (32, 128, 128), (1, 128, 128)


def _refined(mask: np.ndarray, tiles: list, chunks: tuple[int, int, int]) -> list[int]:
    """The tiles the engine would refine on ``mask`` (its own chunked foreground boxes and skip test)."""
    import dask.array as da

    arr = da.from_array(mask, chunks=chunks)
    keep, _ = occupied(tiles, Occupancy.of(np.asarray(chunk_boxes(arr).compute()), arr.chunks))
    return [t.id for t in keep]


def test_core_of_the_bench_corner_tile_is_out_of_every_other_region() -> None:
    tiles = plan_tiles(SHAPE, TILE, HALO, ALIGN)
    box = core(tiles, 0)
    # tile 1's region starts 128 before its interior (512), in y and in x; one z tile, so all of z
    assert [(s.start, s.stop) for s in box] == [(0, 256), (0, 384), (0, 384)]
    for t in tiles[1:]:
        assert any(s.stop <= r.start or s.start >= r.stop for s, r in zip(box, t.region))
    # tile 9 (y 2, x 1): in y, halos of 128 on both sides; in x, its neighbour 0 is a border tile whose region is
    # pushed inward to [0, 768), 256 into it
    inner = core(tiles, 9)
    assert [(s.start, s.stop) for s in inner][1:] == [(1152, 1408), (768, 896)]


def test_foreground_in_one_core_refines_one_tile_in_twenty() -> None:
    shape, tile, halo, chunks = (8, 1280, 1024), (8, 256, 256), (0, 64, 64), (8, 64, 64)
    tiles = plan_tiles(shape, tile, halo, (1, 64, 64))
    assert len(tiles) == 20
    for tid in (0, 7, 19):
        box = core(tiles, tid)
        block = np.ones(tuple(s.stop - s.start for s in box), bool)
        mask = place(shape, [(box, block)], chunks).compute()
        assert mask.sum() == block.size and mask[box].all()
        refined = _refined(mask, tiles, chunks)
        assert refined == [tid] and len(refined) / len(tiles) <= 0.05
        # one voxel more toward a neighbour and that neighbour works too: the core is tight
        grown = tuple(slice(s.start, s.stop + 1) if a == 2 and s.stop < shape[2] else
                      slice(max(s.start - 1, 0), s.stop) if a == 2 else s for a, s in enumerate(box))
        bigger = np.zeros(shape, bool)
        bigger[grown] = True
        assert len(_refined(bigger, tiles, chunks)) == 2


def test_tile_costs_split_a_run_and_the_projection_gives_it_back() -> None:
    costs = TileCosts.of_run(100.0, [30.0, 50.0], tiles=20, workers=1)
    assert costs.empty == pytest.approx(1.0) and costs.task == pytest.approx(40.0)
    assert costs.occupied == pytest.approx(41.0)
    # the run's own volume at its own occupancy on its one worker takes the run's time
    hours = projected_hours(20 * 1000, 1000, 2 / 20, costs, workers=1)
    assert hours * 3600 == pytest.approx(100.0)
    # two workers for 60 s: 120 worker-seconds, of which 80 in tasks
    assert TileCosts.of_run(60.0, [30.0, 50.0], tiles=20, workers=2).empty == pytest.approx(2.0)


def test_projection_for_a_brain() -> None:
    costs = TileCosts(empty=5.0, task=40.0)
    tile_voxels = 256 * 512 * 512
    tiles = math.ceil(1e12 / tile_voxels)
    assert tiles == 14902
    # 5 % of tiles at 45 s, 95 % at 5 s: 7 s a tile, over 100 workers of 2 cores
    expected = tiles * 7.0 / 200 / 3600
    assert projected_hours(1e12, tile_voxels, 0.05, costs, workers=100, cores_per_worker=2) == pytest.approx(expected)
    assert expected == pytest.approx(0.14488, abs=1e-5)
    assert projected_hours(1e12, tile_voxels, 0.0, costs, 100, 2) < projected_hours(1e12, tile_voxels, 1.0, costs,
                                                                                      100, 2)
    # solved for the task: the task that makes it one hour gives one hour back
    task = task_seconds_for(1.0, 1e12, tile_voxels, 0.05, costs.empty, 100, 2)
    assert task == pytest.approx((3600 * 200 / 14902 - 5.0) / 0.05)
    assert projected_hours(1e12, tile_voxels, 0.05, TileCosts(5.0, task), 100, 2) == pytest.approx(1.0)


@pytest.mark.parametrize("kwargs", [dict(run_seconds=10.0, task_seconds=[20.0], tiles=4),
                                    dict(run_seconds=10.0, task_seconds=[1.0], tiles=0),
                                    dict(run_seconds=0.0, task_seconds=[], tiles=4)])
def test_tile_costs_refuse_impossible_runs(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        TileCosts.of_run(**kwargs)


def test_projection_refuses_an_occupancy_outside_zero_one() -> None:
    with pytest.raises(ValueError, match="occupancy"):
        projected_hours(1e12, 1000, 1.5, TileCosts(1.0, 1.0), 100, 2)
