"""``refine.py executor=dask`` on two synthetic OME-Zarr volumes, one 4x the other (256 x 1024 x 1024 and
256 x 2048 x 2048 voxels): each worker's peak memory must stay flat between the two (within 25 %), and the
time should grow no worse than linearly (ratio <= 4, plus what the halo of the volume's inner tiles costs).

The volumes are tiled from one generated stack (SYNTHETIC synthetic_cwmbs_weak, 256 x 512 x 512, its gold label
with breaks cut into it and specks added), mirrored at every seam so that fibres run on across tiles. The run
is the whole engine: a 2-worker LocalCluster (1 thread each), the default plan (tiles 256 x 512 x 512, halo 128
in y and x, chunks 64 x 256 x 256), the shipped TopoRefineNet editor, pyramid, per-tile kimimaro skeletons and
the overview. The agents are the heuristic ones (the learned ones are measured against them below).

Peak memory is each worker process's ``ru_maxrss`` (what the kernel saw it hold, everything included), taken
from the tiles' summaries. ``BENCH_WHOLE_VOLUME=quick`` runs 128 x 512 x 512 and 128 x 1024 x 1024 (tiles of
128 x 256 x 256) instead.
Both volumes have tiles inside and on the border; border tiles read a region as large as inner ones (the plan
pushes it inward), so the worker's memory is the plan's, whatever the volume.

``whole_volume/empty_mask``: what empty space costs. One volume (64 x 1024 x 1024, tiled from a 64 x 512 x 512
stack; 4 tiles of 64 x 512 x 512, halo 128 in y and x) refined twice in one process, each run the whole command
with its own 2-worker LocalCluster: with an all-empty mask (timed) and with its mask and the heuristic agents
(the reference). The ratio is what an empty brain costs against a refined one (the target: <= 0.1).

``whole_volume/agents_dense`` and ``whole_volume/agents_sparse``: the default (learned) agents against the
heuristic ones on the same volume, each the whole command in one process on one one-thread worker (a tile's
task and the passes over the volume are then that worker's own seconds). Dense: the 256 x 1024 x 1024 volume
above, every tile occupied. Sparse: 256 x 2560 x 2048 on the default plan, 20 tiles, the stand-in image over all
of it and its mask only in the core of one tile (the part no other tile's region reads: tile occupancy 5 %), with
fresh breaks and specks there. Each prints the worker's throughput (MVoxel/s) per agent set and the
learned/heuristic ratio (target: <= 1.5); the sparse one also the per-tile costs (``bench/sparse_volume.py``) and
the hours for 1e12 voxels at its occupancy on 100 two-core workers (target: <= 1 with the learned agents), and
how long an occupied tile's task could take before that reaches the hour (the stand-in's tiles are easy ones).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.core import SMOKE, Case

QUICK = os.environ.get("BENCH_WHOLE_VOLUME") == "quick"
if SMOKE:
    BASE, SMALL, LARGE = (32, 128, 128), (32, 128, 128), (32, 256, 256)
    PLAN = ["executor.tile=[32,128,128]", "executor.chunks=[32,64,64]", "executor.halo=[0,128,128]"]
    BREAKS, SPECKS = 0, 0   # smoke: the gold as it is, so no editor call (its figures mean nothing anyway)
elif QUICK:
    BASE, SMALL, LARGE = (128, 256, 256), (128, 512, 512), (128, 1024, 1024)
    PLAN = ["executor.tile=[128,256,256]"]
    BREAKS, SPECKS = 2, 4
else:
    BASE, SMALL, LARGE = (256, 512, 512), (256, 1024, 1024), (256, 2048, 2048)
    PLAN = []
    BREAKS, SPECKS = 2, 4


def _base(shape: tuple[int, int, int] = BASE) -> tuple[np.ndarray, np.ndarray, tuple]:
    from neurorefiner.defects.damage import cut_and_speckle
    from neurorefiner.synth import render_volume
    from neurorefiner.synth.presets import preset_params

    image, label, _, spacing = render_volume(preset_params("synthetic_cwmbs_weak").replace(shape=shape), 0)
    return image, cut_and_speckle(label, np.random.default_rng(0), BREAKS, SPECKS), spacing


def _tiled(base: np.ndarray, shape: tuple[int, int, int]):  # type: ignore[no-untyped-def]
    """``base`` repeated over ``shape`` as a Dask array, mirrored at every seam (fibres run on)."""
    import dask.array as da

    ny, nx = shape[1] // base.shape[1], shape[2] // base.shape[2]
    b = da.from_array(base, chunks=(64, 256, 256))
    rows = [[b[:, ::(-1 if r % 2 else 1), ::(-1 if c % 2 else 1)] for c in range(nx)] for r in range(ny)]
    return da.block([[x for x in row] for row in rows])


def _setup() -> dict:
    from neurorefiner.io.ome_zarr import write_ome_zarr_volume

    tmp = Path(tempfile.mkdtemp(prefix="bench_whole_volume_"))
    image, mask, spacing = _base()
    for name, shape in (("small", SMALL), ("large", LARGE)):
        write_ome_zarr_volume(tmp / f"{name}_image.ome.zarr", _tiled(image, shape), spacing)
        write_ome_zarr_volume(tmp / f"{name}_mask.ome.zarr", _tiled(mask, shape), spacing)
    arg = {"tmp": tmp, "summaries": {}, "cluster": None}
    if SMOKE:  # one cluster for both runs (the smoke test's time); a figure run starts one per size (fresh memory)
        import logging

        from distributed import LocalCluster

        arg["cluster"] = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                                      silence_logs=logging.ERROR)
    return arg


def _refine(arg: dict, name: str, plan: list[str] = PLAN, *, volume: str | None = None, agent: str = "heuristic",
            workers: int = 2) -> None:
    """``refine.py executor=dask`` on ``{volume}_image`` / ``{volume}_mask`` (``volume`` defaults to ``name``),
    out to ``{name}_out``; keeps the run's summary, each refined tile's task seconds and the command's wall time."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.agents.trace import read_trace
    from neurorefiner.paths import project_root
    from neurorefiner.refine.entry import run

    tmp, volume = arg["tmp"], volume or name
    shutil.rmtree(tmp / f"{name}_out", ignore_errors=True)
    t0 = time.perf_counter()
    with initialize_config_dir(version_base="1.3", config_dir=str(project_root() / "conf")):
        cfg = compose(config_name="refine", overrides=[
            "executor=dask", f"agent={agent}", f"image={tmp / f'{volume}_image.ome.zarr'}",
            f"mask={tmp / f'{volume}_mask.ome.zarr'}", f"out={tmp / f'{name}_out'}", "progress=false",
            f"executor.n_workers={workers}", "executor.threads_per_worker=1", "executor.dashboard_address=null",
            *plan, *([f"executor.address={arg['cluster'].scheduler_address}"] if arg["cluster"] is not None else []),
            "paths.output_dir=/tmp/nr-unused"])
    arg["summaries"][name] = run(cfg)
    arg.setdefault("wall", {})[name] = time.perf_counter() - t0
    records = read_trace(tmp / f"{name}_out" / "trace.jsonl")
    arg.setdefault("tasks", {})[name] = [float(r["summary"]["seconds"]) for r in records
                                         if r.get("type") == "tile_done" and r["summary"].get("status") == "refined"]


def _figures(arg: dict, t: float) -> dict:
    out: dict = {}
    for name in ("small", "large"):
        s = arg["summaries"][name]
        peaks = sorted(s["peak worker memory GiB"].values())
        out[f"{name}_peak_worker_gib_max"] = float(max(peaks))
        out[f"{name}_peak_worker_gib_min"] = float(min(peaks))
        out[f"{name}_accepted"] = float(s["accepted"])
        out[f"{name}_tiles"] = float(s["tiles"])
    out["memory_ratio_large_to_small"] = out["large_peak_worker_gib_max"] / out["small_peak_worker_gib_max"]
    out["memory_flat_within_25pct"] = float(abs(out["memory_ratio_large_to_small"] - 1.0) <= 0.25)
    out["volume_ratio"] = float(np.prod(LARGE) / np.prod(SMALL))
    if arg["cluster"] is not None:
        arg["cluster"].close()
    shutil.rmtree(arg["tmp"], ignore_errors=True)
    return out


if SMOKE:
    EMPTY_BASE, EMPTY_SHAPE = BASE, SMALL
    EMPTY_PLAN = PLAN
else:
    EMPTY_BASE, EMPTY_SHAPE = (64, 512, 512), (64, 1024, 1024)
    EMPTY_PLAN = ["executor.tile=[64,512,512]", "executor.halo=[0,128,128]", "executor.chunks=[64,256,256]"]


def _empty_setup() -> dict:
    from neurorefiner.io.ome_zarr import write_ome_zarr_volume

    tmp = Path(tempfile.mkdtemp(prefix="bench_empty_space_"))
    image, mask, spacing = _base(EMPTY_BASE)
    write_ome_zarr_volume(tmp / "empty_image.ome.zarr", _tiled(image, EMPTY_SHAPE), spacing)
    write_ome_zarr_volume(tmp / "empty_mask.ome.zarr", np.zeros(EMPTY_SHAPE, bool), spacing)
    (tmp / "dense_image.ome.zarr").symlink_to(tmp / "empty_image.ome.zarr")
    write_ome_zarr_volume(tmp / "dense_mask.ome.zarr", _tiled(mask, EMPTY_SHAPE), spacing)
    return {"tmp": tmp, "summaries": {}, "cluster": None}


def _empty_figures(arg: dict, t: float) -> dict:
    empty, dense = arg["summaries"]["empty"], arg["summaries"]["dense"]
    out = {"empty_tiles_refined": float(empty.get("refined tiles", 0)),
           "empty_tiles_skipped": float(empty.get("skipped tiles", 0)),
           "dense_tiles_refined": float(dense.get("refined tiles", 0)),
           "dense_accepted": float(dense["accepted"]), "dense_seconds": float(dense["seconds"]),
           "empty_seconds": float(empty["seconds"])}
    shutil.rmtree(arg["tmp"], ignore_errors=True)
    return out


# ------------------------------------------------------------------ the default (learned) agents against the heuristic
AGENT_WORKERS = 1   # one one-thread worker: a tile's task and the passes are then its own seconds, idle time none
if SMOKE:
    SPARSE_TILE, SPARSE_HALO, SPARSE_CHUNKS = (32, 256, 256), (0, 128, 128), (32, 256, 256)
elif QUICK:
    SPARSE_TILE, SPARSE_HALO, SPARSE_CHUNKS = (128, 256, 256), (32, 128, 128), (64, 256, 256)
else:  # the default plan (conf/executor/dask.yaml), spelled out: the sparse mask is laid out on it
    SPARSE_TILE, SPARSE_HALO, SPARSE_CHUNKS = (256, 512, 512), (32, 128, 128), (64, 256, 256)
SPARSE = (SPARSE_TILE[0], 5 * SPARSE_TILE[1], 4 * SPARSE_TILE[2])   # 20 tiles, one of them occupied: 5 %
SPARSE_PLAN = [f"executor.{key}=[{','.join(map(str, v))}]"
               for key, v in (("tile", SPARSE_TILE), ("halo", SPARSE_HALO), ("chunks", SPARSE_CHUNKS))]
PROJECTION = {"voxels": 1e12, "workers": 100, "cores_per_worker": 2}   # the brain and cluster


def _agents_setup() -> dict:
    """The dense volume (``SMALL``, tiled from the stand-in stack as above), every tile occupied."""
    from neurorefiner.io.ome_zarr import write_ome_zarr_volume

    tmp = Path(tempfile.mkdtemp(prefix="bench_agents_dense_"))
    image, mask, spacing = _base()
    write_ome_zarr_volume(tmp / "dense_image.ome.zarr", _tiled(image, SMALL), spacing)
    write_ome_zarr_volume(tmp / "dense_mask.ome.zarr", _tiled(mask, SMALL), spacing)
    return {"tmp": tmp, "summaries": {}, "cluster": None, "volume": "dense", "plan": PLAN}


def _sparse_setup() -> dict:
    """The sparse volume (``SPARSE``): the stand-in image tiled over all of it (every chunk is real data, read by
    the global pass as a brain's would be), its mask only in the core of tile 0 (the part no other tile's region
    reads), with as many fresh breaks and specks there as one stand-in stack gets; one tile of 20 is refined."""
    from omegaconf import OmegaConf

    from bench.sparse_volume import core, place
    from neurorefiner.defects.damage import cut_and_speckle
    from neurorefiner.io.ome_zarr import write_ome_zarr_volume
    from neurorefiner.paths import project_root
    from neurorefiner.refine.whole_volume.tiles import plan_tiles

    tmp = Path(tempfile.mkdtemp(prefix="bench_agents_sparse_"))
    image, mask, spacing = _base()
    block = int(OmegaConf.load(project_root() / "conf" / "loop" / "default.yaml").block_size)
    box = core(plan_tiles(SPARSE, SPARSE_TILE, SPARSE_HALO, (1, block, block)), 0)
    occupied = cut_and_speckle(_tiled(mask, SPARSE)[box].compute(), np.random.default_rng(1), BREAKS, SPECKS)
    write_ome_zarr_volume(tmp / "sparse_image.ome.zarr", _tiled(image, SPARSE), spacing, SPARSE_CHUNKS)
    write_ome_zarr_volume(tmp / "sparse_mask.ome.zarr", place(SPARSE, [(box, occupied)], SPARSE_CHUNKS), spacing,
                          SPARSE_CHUNKS)
    return {"tmp": tmp, "summaries": {}, "cluster": None, "volume": "sparse", "plan": SPARSE_PLAN,
            "core": [[s.start, s.stop] for s in box]}


def _agents_run(arg: dict, agent: str) -> None:
    _refine(arg, f"{arg['volume']}_{agent}", arg["plan"], volume=arg["volume"], agent=agent, workers=AGENT_WORKERS)


def _agents_figures(arg: dict, t: float) -> dict:
    """Per agent set: wall time, the engine's seconds, each worker's throughput, tiles, mean task and edits; the
    learned/heuristic ratios; for the sparse volume the per-tile costs and the projection with their inputs."""
    from bench.sparse_volume import TileCosts, projected_hours, task_seconds_for

    out: dict = {}
    for agent in ("learned", "heuristic"):
        name = f"{arg['volume']}_{agent}"
        s, tasks = arg["summaries"][name], arg["tasks"][name]
        voxels, tiles = float(np.prod(s["shape"])), int(s["tiles"])
        out[f"{agent}_wall_s"] = float(arg["wall"][name])
        out[f"{agent}_engine_s"] = float(s["seconds"])
        out[f"{agent}_mvoxel_per_s_per_worker"] = voxels / float(s["seconds"]) / AGENT_WORKERS / 1e6
        out[f"{agent}_tile_task_s_mean"] = float(np.mean(tasks)) if tasks else 0.0
        out[f"{agent}_accepted"], out[f"{agent}_rejected"] = float(s["accepted"]), float(s["rejected"])
        out["tiles"], out["refined_tiles"] = float(tiles), float(s["refined tiles"])
        if arg["volume"] == "sparse":
            costs = TileCosts.of_run(float(s["seconds"]), tasks, tiles, AGENT_WORKERS)
            occupancy = float(s["refined tiles"]) / tiles
            out["occupancy"], out["tile_voxels"] = occupancy, float(np.prod(SPARSE_TILE))
            out[f"{agent}_empty_tile_s"], out[f"{agent}_occupied_tile_s"] = costs.empty, costs.occupied
            scale = (PROJECTION["voxels"], int(np.prod(SPARSE_TILE)), occupancy)
            cluster = (PROJECTION["workers"], PROJECTION["cores_per_worker"])
            out[f"{agent}_projected_hours"] = projected_hours(*scale, costs, *cluster)
            # what an occupied tile's task may take before the projection reaches the hour
            out[f"{agent}_task_s_for_1h"] = task_seconds_for(1.0, *scale, costs.empty, *cluster) if occupancy else 0.0
    out["learned_to_heuristic_wall"] = out["learned_wall_s"] / out["heuristic_wall_s"]
    out["learned_to_heuristic_engine"] = out["learned_engine_s"] / out["heuristic_engine_s"]
    out["learned_within_1.5x"] = float(out["learned_to_heuristic_wall"] <= 1.5)
    if arg["volume"] == "sparse":
        out.update({f"projection_{k}": float(v) for k, v in PROJECTION.items()})
        out["occupancy_at_most_5pct"] = float(out["occupancy"] <= 0.05)
        out["learned_projection_within_1h"] = float(out["learned_projected_hours"] <= 1.0)
    shutil.rmtree(arg["tmp"], ignore_errors=True)
    return out


CASES = [
    Case(f"whole_volume/dask_{'x'.join(map(str, LARGE))}", _setup, lambda a: _refine(a, "large"),
         reference=lambda a: _refine(a, "small"), reference_name=f"same engine, {'x'.join(map(str, SMALL))} (1/4)",
         repeats=1, warmup=False, extra=_figures,
         notes="executor=dask, 2-worker LocalCluster, heuristic agents + shipped TopoRefineNet editor; ratio = time "
               "ratio large/small (volume ratio 4); peak memory per worker must stay within 25 %"),
    Case(f"whole_volume/empty_mask_{'x'.join(map(str, EMPTY_SHAPE))}", _empty_setup,
         lambda a: _refine(a, "empty", EMPTY_PLAN), reference=lambda a: _refine(a, "dense", EMPTY_PLAN),
         reference_name="same image, its mask, heuristic agents", repeats=1, warmup=False, extra=_empty_figures,
         notes="executor=dask, 2-worker LocalCluster each run; ratio = all-empty mask / refined mask (target: "
               "<= 0.1)"),
    Case(f"whole_volume/agents_dense_{'x'.join(map(str, SMALL))}", _agents_setup, lambda a: _agents_run(a, "learned"),
         reference=lambda a: _agents_run(a, "heuristic"), reference_name="same volume, heuristic agents",
         repeats=1, warmup=False, extra=_agents_figures,
         notes="executor=dask, one 1-thread worker; ratio = learned (default) / heuristic agents, whole command "
               "(target: <= 1.5)"),
    Case(f"whole_volume/agents_sparse_{'x'.join(map(str, SPARSE))}", _sparse_setup,
         lambda a: _agents_run(a, "learned"), reference=lambda a: _agents_run(a, "heuristic"),
         reference_name="same volume, heuristic agents", repeats=1, warmup=False, extra=_agents_figures,
         notes="executor=dask, one 1-thread worker, 1 tile of 20 occupied; ratio = learned / heuristic agents "
               "(target: <= 1.5); projected_hours: 1e12 voxels at this occupancy on 100 two-core workers "
               "(target: <= 1 with the learned agents)"),
]
