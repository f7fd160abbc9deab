"""One tile's work, what a Dask worker runs: read the tile and its halo, refine them with the in-memory loop,
commit the tile's interior to the output store, skeletonize it. A function of its :class:`TileJob` and of the
files it names, nothing else, so a task that dies is simply run again.

Why the loop runs on the whole region and only the interior is kept: the blocks of the halo give the tile's
border blocks the context the in-memory run would give them (a break that straddles the tile's border is seen
whole), and the halo's own edits belong to the neighbouring tile, which makes them with its own context.

The run (:class:`~neurorefiner.refine.run.RefineRun`) comes from the driver, scattered once to each worker: a
task neither reads the config nor resolves a setting, and the worker's roles and editor are built once, when the
run arrives (its recipe), for all the tiles it refines.

Within a tile the trace is the loop's own (``traces/tile_XXXXX.jsonl``: run header, every decision,
``block_done``, ``done``), so a task killed half way resumes from its finished blocks as ``executor=local`` does.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.loop import Agents, PriorRun
from neurorefiner.agents.trace import read_trace
from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.io.ome_zarr import ZarrSource, write_region
from neurorefiner.refine.run import RefineRun, same_run
from neurorefiner.refine.whole_volume.guard import BorderGuard, continuing_face_points
from neurorefiner.refine.whole_volume.skeleton_merge import depth_first
from neurorefiner.refine.whole_volume.tiles import Tile
from neurorefiner.topology.blocks import Slices


@dataclass
class TileJob:
    """Where one task reads and writes, picklable (paths, no arrays); the run travels beside it."""

    tile: Tile
    image: ZarrSource
    mask: ZarrSource
    output: str                       # level-0 array of the output store
    intensity: tuple[float, float]    # the whole image's min and max (normalisation as executor=local does it)
    trace_dir: str
    skeleton_dir: str | None = None
    threads: int = 1
    inputs: dict = field(default_factory=dict)
    root: Sequence[float] | None = None   # the soma (ZYX voxels, volume coordinates), if told


def tile_root(root: Sequence[float] | None, region: Slices) -> tuple[float, float, float] | None:
    """The soma in a tile's region coordinates when it lies in that region (interior or halo), else None: the
    tile holding the soma grows the piece at it, as the in-memory run does; every other tile meets the neuron
    entering through its faces and grows its largest piece."""
    if root is None or not all(sl.start <= v < sl.stop for v, sl in zip(root, region)):
        return None
    return tuple(float(v - sl.start) for v, sl in zip(root, region))  # type: ignore[return-value]


def normalise(data: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """float32 in [0, 1] with the whole volume's min and max: the same arithmetic as
    :meth:`neurorefiner.io.Volume.normalized` (float32 throughout), so one tile equals the in-memory run."""
    data = np.array(data, dtype=np.float32)   # a copy: the operations below work in place (one region in memory)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if hi32 <= lo32:
        return np.zeros_like(data)
    data -= lo32
    data /= hi32 - lo32
    return np.clip(data, 0.0, 1.0, out=data)


def _prior(path: Path, header: dict) -> Any:
    """The finished work of this tile's earlier attempt, if its trace is of the same run; else a fresh trace."""
    records = read_trace(path) if path.exists() else []
    runs = [r for r in records if r.get("type") == "run"]
    if runs and same_run(runs[-1], header):
        return PriorRun(records)
    path.unlink(missing_ok=True)
    return None


def peak_rss() -> int:
    """This process's peak resident memory in bytes (Linux reports ``ru_maxrss`` in KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def within(data: np.ndarray, origin: Slices, box: Slices) -> np.ndarray:
    """``box`` (volume coordinates) of ``data``, an array read at ``origin`` (volume coordinates)."""
    return data[tuple(slice(b.start - o.start, b.stop - o.start) for b, o in zip(box, origin))]


def refine_tile(job: TileJob, loop: RefineRun) -> dict:
    """Refine one tile with ``loop`` (the driver's run) and commit its interior; returns the tile's summary
    (counts, voxels, seconds, memory)."""
    t0 = time.perf_counter()
    try:
        import torch

        torch.set_num_threads(max(1, int(job.threads)))
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    tile = job.tile
    # the mask is read once: the region and the voxel planes just beyond its cut faces (the border guard's)
    grown = tuple(slice(max(s.start - 1, 0), min(s.stop + 1, n)) for s, n in zip(tile.region, job.mask.shape))
    around = job.mask.read(grown) > 0   # type: ignore[arg-type]
    mask = np.ascontiguousarray(within(around, grown, tile.region))
    inner = tile.interior_in_region
    summary = {"tile": tile.id, "interior": tile.as_dict()["interior"], "worker_pid": os.getpid()}
    before = int(mask[inner].sum())
    if not mask.any():   # the plan skips such tiles; a region the mask's chunk boxes overstated lands here
        write_region(job.output, tile.interior, mask[inner])
        return {**summary, "status": "empty", "voxels before": 0, "voxels after": 0, "accepted": 0,
                "rejected": 0, "escalated": 0, "rounds": 0, "seconds": round(time.perf_counter() - t0, 3),
                "peak_rss": peak_rss()}
    faces = continuing_face_points(tile.region, job.mask.shape, functools.partial(within, around, grown))
    del around
    image = normalise(job.image.read(tile.region), *job.intensity)
    if not np.isfinite(image).all():
        raise ValueError(f"{job.image.path}: NaN/inf voxels in tile {tile.id}")
    guarded = dataclasses.replace(loop, agents=Agents(BorderGuard(loop.agents.inspector, faces),
                                                      loop.agents.advisor, loop.agents.validator))
    root = tile_root(job.root, tile.region)
    header = guarded.header(image, mask, tile=tile.as_dict(), **({} if root is None else {"root_zyx": list(root)}))
    trace = Path(job.trace_dir) / f"tile_{tile.id:05d}.jsonl"
    prior = _prior(trace, header)
    result = guarded.run(image, mask, trace, {**job.inputs, "tile": tile.id}, prior, header, root=root)
    refined = result.mask[inner]
    write_region(job.output, tile.interior, refined)
    if job.skeleton_dir is not None:
        write_tile_skeleton(refined, tile.interior, loop.spacing, Path(job.skeleton_dir) / f"tile_{tile.id:05d}.swc")
    return {**summary, "status": "refined", "voxels before": before, "voxels after": int(refined.sum()),
            **{k: result.counts[k] for k in ("accepted", "rejected", "escalated")}, "rounds": len(result.rounds),
            "converged": result.converged, "seconds": round(time.perf_counter() - t0, 3),
            "seconds per role": result.seconds, "peak_rss": peak_rss()}


def write_tile_skeleton(mask: np.ndarray, interior: Slices, spacing: tuple[float, float, float], path: Path) -> int:
    """kimimaro's TEASAR skeleton of one tile's refined mask as SWC in um, volume coordinates (x, y, z), nodes
    numbered depth first so every parent precedes its children; returns the number of nodes (an empty tile
    writes a file with no nodes)."""
    import kimimaro

    lines = [f"# kimimaro skeleton of the refined mask, tile at z,y,x = {[s.start for s in interior]} "
             f"(voxels), spacing z,y,x = {list(spacing)} um; columns: id type x y z radius parent (um)"]
    count = 0
    if mask.any():
        skels = kimimaro.skeletonize(np.ascontiguousarray(mask, dtype=np.uint8), anisotropy=tuple(spacing),
                                     dust_threshold=0, progress=False, fix_branching=True, fix_borders=True,
                                     parallel=1)
        offset = np.array([s.start * sp for s, sp in zip(interior, spacing)], float)
        for skel in skels.values():
            zyx = np.asarray(skel.vertices, float) + offset
            radii = np.asarray(getattr(skel, "radii", np.ones(len(zyx))), float)
            ids: dict[int, int] = {}
            for v, parent in depth_first(len(zyx), np.asarray(skel.edges, np.int64).reshape(-1, 2)):
                count += 1
                ids[v] = count
                z, y, x = zyx[v]
                lines.append(f"{count} 3 {x:.3f} {y:.3f} {z:.3f} {radii[v]:.3f} {ids[parent] if parent >= 0 else -1}")
    write_text_atomic(path, "\n".join(lines) + "\n")
    return count
