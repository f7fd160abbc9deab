"""The sparse whole-volume case's building blocks (``bench/cases/whole_volume.py``): where a sparse volume's
foreground goes, and what a brain at that occupancy would cost.

A tile is refined when its region (tile + halo) meets foreground, so foreground near a tile's border makes its
neighbours work too. :func:`core` is the part of a tile that no other tile's region reads (the plan's own
regions, border tiles pushed inward included): foreground there keeps exactly that tile busy, and a volume with
foreground only in the cores of ``k`` of its ``n`` tiles has a tile occupancy of ``k / n`` as the engine counts it.

:class:`TileCosts` splits a run on one one-thread worker into what every tile costs (the run's passes over the
whole volume: the global statistics, the pyramid, the overview, and the run's fixed costs, spread over the plan's
tiles) and what a refined tile's task adds; :func:`projected_hours` scales that to another volume, occupancy and
cluster: ``tiles x (occupancy x occupied + (1 - occupancy) x empty) / cores``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.refine.whole_volume.tiles import Tile
from neurorefiner.topology.blocks import Slices


def core(tiles: Sequence[Tile], tile_id: int) -> Slices:
    """The box of tile ``tile_id``'s interior that no other tile's region meets (empty slices where the halo
    leaves none). Per axis: above the regions of the tiles before it, below those of the tiles after it."""
    own = tiles[tile_id]
    box = []
    for axis, inner in enumerate(own.interior):
        lo, hi = inner.start, inner.stop
        for t in tiles:
            if t.interior[axis].stop <= inner.start:
                lo = max(lo, t.region[axis].stop)
            elif t.interior[axis].start >= inner.stop:
                hi = min(hi, t.region[axis].start)
        box.append(slice(lo, max(lo, hi)))
    return tuple(box)  # type: ignore[return-value]


def place(shape: Sequence[int], blocks: Sequence[tuple[Slices, np.ndarray]],
          chunks: Sequence[int] = (64, 256, 256)):  # type: ignore[no-untyped-def]
    """A lazy bool Dask array of ``shape``: each ``(box, block)`` put at its box, zero everywhere else."""
    import dask.array as da

    out = da.zeros(tuple(shape), bool, chunks=tuple(chunks))
    for box, block in blocks:
        pad = [(s.start, int(n) - s.stop) for s, n in zip(box, shape)]
        out = da.logical_or(out, da.pad(da.from_array(np.asarray(block, bool)), pad))
    return out.rechunk(tuple(chunks))


@dataclass(frozen=True)
class TileCosts:
    """Seconds of one one-thread worker per tile: ``empty`` every tile pays (the run's passes over the volume and
    its fixed costs), ``task`` a refined tile's task adds on top (reading its region, the loop, writing)."""

    empty: float
    task: float

    @property
    def occupied(self) -> float:
        return self.empty + self.task

    @classmethod
    def of_run(cls, run_seconds: float, task_seconds: Sequence[float], tiles: int, workers: int = 1) -> TileCosts:
        """From a run of ``run_seconds`` over a plan of ``tiles`` tiles whose refined tiles' tasks took
        ``task_seconds``: what the workers spent outside the tasks, spread over every tile (with more than one
        worker, their idle time counts too: measure on one)."""
        if tiles < 1 or workers < 1 or run_seconds <= 0:
            raise ValueError(f"a run needs tiles, workers and time, got {tiles}, {workers}, {run_seconds}")
        busy = run_seconds * workers
        outside = busy - float(sum(task_seconds))
        if outside < 0:
            raise ValueError(f"the tasks took {sum(task_seconds):.1f} s, more than {workers} worker(s) had "
                             f"({busy:.1f} s)")
        return cls(outside / tiles, statistics.fmean(task_seconds) if task_seconds else 0.0)


def projected_hours(voxels: float, tile_voxels: int, occupancy: float, costs: TileCosts, workers: int,
                    cores_per_worker: int = 1) -> float:
    """Hours for a volume of ``voxels`` in tiles of ``tile_voxels`` of which ``occupancy`` hold foreground, on
    ``workers`` machines of ``cores_per_worker`` cores, each core a one-thread worker as the costs were measured
    (one tile per core, tiles spread evenly)."""
    if not 0.0 <= occupancy <= 1.0:
        raise ValueError(f"occupancy must be within [0, 1], got {occupancy}")
    tiles = math.ceil(voxels / tile_voxels)
    per_tile = occupancy * costs.occupied + (1.0 - occupancy) * costs.empty
    return tiles * per_tile / (workers * cores_per_worker) / 3600.0


def task_seconds_for(hours: float, voxels: float, tile_voxels: int, occupancy: float, empty: float, workers: int,
                     cores_per_worker: int = 1) -> float:
    """The seconds a refined tile's task may take for :func:`projected_hours` to reach ``hours`` (the same
    formula solved for the task; empty tiles as measured): the margin an occupied tile harder than the
    bench's has before the target is missed."""
    if not 0.0 < occupancy <= 1.0:
        raise ValueError(f"occupancy must be within (0, 1], got {occupancy}")
    tiles = math.ceil(voxels / tile_voxels)
    return (hours * 3600.0 * workers * cores_per_worker / tiles - empty) / occupancy
