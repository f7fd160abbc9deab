"""``refine.py executor=dask``: the driver. Opens the OME-Zarr inputs lazily, starts (or joins) a Dask cluster,
maps :func:`~neurorefiner.refine.whole_volume.task.refine_tile` over the tiles not yet committed, records each
committed tile in ``out/trace.jsonl``, then builds the output's pyramid and moves the outputs into ``out``.

Why Dask distributed and no scheduler of our own: the tasks are independent (one per tile, each a pure
function of its files), which is exactly what ``Client.map`` and ``as_completed`` schedule, retry and show on
the dashboard, on a laptop (``LocalCluster``) or on a lab's cluster (``executor.address``, e.g. a
``dask-jobqueue`` ``SLURMCluster``; docs/whole_volume.md). The only global steps are chunked Dask reductions:
the image's min and max (the normalisation ``executor=local`` uses), the mask's values (binary?), where the mask
has foreground (a box per chunk: tiles whose region holds none are never scheduled) and z-MIPs for an overview
picture; none holds a volume in memory. The run (:class:`~neurorefiner.refine.run.RefineRun`: roles,
editor, loop settings, voxel size) is built once here and scattered to the workers, which rebuild its roles and
editor from its recipe once each and resolve nothing again.

The output folder: ``refined_mask.ome.zarr`` (NGFF 0.4 pyramid, uint8 0/255), ``skeletons/tile_XXXXX.swc``
(kimimaro, per tile), ``refined_skeleton.swc`` (those joined across tile borders), ``overview.png``,
``trace.jsonl`` (run header, one ``tile_done`` per committed tile, the summary) and ``traces/tile_XXXXX.jsonl``
(each tile's loop trace, as ``executor=local`` writes one). Until the run ends the store and the skeletons live
in ``out/.work``; they are moved in together at the end, so ``out`` never shows a half-written mask. A killed run
resumes from ``.work`` and the trace: committed tiles are not redone, a tile killed half way resumes from its own
trace.
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.roles import RoleError
from neurorefiner.agents.trace import TraceWriter, read_trace
from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path
from neurorefiner.io.ome_zarr import (
    ZarrSource,
    create_mask_store,
    finish_pyramid,
    is_zarr_path,
    open_ome_zarr,
    pool_max,
)
from neurorefiner.io.swc import write_swc
from neurorefiner.refine.output_lock import OutputLock, check_output_dir
from neurorefiner.refine.run import RefineRun, differences, soma_root
from neurorefiner.refine.whole_volume.skeleton_merge import MERGED_SWC, merge_tile_skeletons
from neurorefiner.refine.whole_volume.task import TileJob, refine_tile
from neurorefiner.refine.whole_volume.tiles import Occupancy, check_plan, chunk_boxes, occupied, plan_tiles

TRACE = "trace.jsonl"
WORK = ".work"
STORE = "refined_mask.ome.zarr"
SKELETON = MERGED_SWC   # the tiles' skeletons joined across tile borders
OUTPUTS = (STORE, "skeletons", SKELETON, "overview.png")
#: everything a run of either executor writes in ``out`` (another run's are refused unless overwrite=true)
RUN_FILES = (*OUTPUTS, TRACE, "traces", "refined_mask.tif", "refined_mask.swc", "report.html")
MATCH_KEYS = ("version", "engine", "image", "mask", "spacing", "settings", "agent", "editor", "plan")


def open_input(path: Any, key: str) -> tuple[ZarrSource, tuple[float, float, float]]:
    """An OME-Zarr input of ``executor=dask``; anything else is refused with the way out."""
    if not is_zarr_path(path):
        raise InputError(f"executor=dask reads OME-Zarr ({key}= must end in .ome.zarr or .zarr); refine a TIFF "
                         "that fits in memory with executor=local, or convert it (docs/whole_volume.md)", path)
    return open_ome_zarr(path)


@dataclass
class DaskExecutor:
    """Refine a volume tile by tile on Dask (``conf/executor/dask.yaml`` documents every field)."""

    name: str = "dask"
    address: str | None = None
    n_workers: int = 2
    threads_per_worker: int = 1
    memory_limit: str | int = "auto"
    dashboard_address: str | None = ":8787"
    tile: Sequence[int] = (256, 512, 512)
    halo: Sequence[int] = (32, 128, 128)
    chunks: Sequence[int] = (64, 256, 256)
    skeletons: bool = True
    overview: bool = True
    pyramid_min_side: int = 256
    components: bool = False

    # ------------------------------------------------------------------------------------------ the run
    def refine(self, cfg: Any) -> dict:
        """What ``refine.py executor=dask`` calls; returns the run's summary (also printed)."""
        out = check_output_dir(str(cfg.out))
        image, _ = open_input(cfg.image, "image")
        mask, _ = open_input(cfg.mask, "mask")
        if image.shape != mask.shape:
            raise InputError(f"mask shape {mask.shape} differs from image shape {image.shape} ({cfg.image})",
                             cfg.mask)
        run = RefineRun.from_config(cfg, image, mask)   # no voxel size anywhere: one line, exit 2, no cluster
        settings = run.settings
        tile, halo, chunks = check_plan(self.tile, self.halo, self.chunks, settings.block_size, settings.block_depth)
        block = (settings.block_depth or 1, settings.block_size, settings.block_size)
        tiles = plan_tiles(image.shape, tile, halo, block)
        inputs = {"image": str(cfg.image), "mask": str(cfg.mask)}
        with OutputLock(out, inputs):
            client, cluster = self._client()
            try:
                import dask

                # rechunks (da.unique, the pyramid) as plain tasks: the P2P shuffle logs a warning per rechunk
                with dask.config.set({"array.rechunk.method": "tasks"}):
                    return self._run(cfg, client, out, image, mask, run, tiles, (tile, halo, chunks), inputs)
            except TileFailure as exc:  # a worker's traceback is noise here: one line, exit 1, resumable
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(1)
            except RoleError as exc:  # a model server down: one line, exit 2, as the in-memory run ends
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
            finally:
                client.close()
                if cluster is not None:
                    cluster.close()

    def _run(self, cfg: Any, client: Any, out: Path, image: ZarrSource, mask: ZarrSource, loop: RefineRun,
             tiles: list, plan: tuple, inputs: dict) -> dict:
        from dask.distributed import as_completed
        from tqdm import tqdm

        spacing = loop.spacing
        t0 = time.perf_counter()
        stats = self._stats(image, mask)
        header = self._header(cfg, image, mask, loop, stats, plan)
        # empty space is free: a tile whose region (tile + halo) holds no foreground is neither read nor refined;
        # its output is empty, as the mask is there, and its chunks are never written (they read as 0)
        planned = len(tiles)
        tiles, skipped = occupied(tiles, Occupancy.of(stats["boxes"], mask.as_dask().chunks))
        done, finished = self._claim(out, header, bool(cfg.get("resume", True)), bool(cfg.get("overwrite", False)))
        if finished is not None:
            print(f"already refined: {out / STORE} (the trace's run is finished); nothing to do", file=sys.stderr)
            return finished
        work = out / WORK
        (work / "skeletons").mkdir(parents=True, exist_ok=True)
        (out / "traces").mkdir(exist_ok=True)
        level0 = create_mask_store(work / STORE, image.shape, plan[2])
        jobs = [TileJob(t, image, mask, level0, (stats["lo"], stats["hi"]), str(out / "traces"),
                        str(work / "skeletons") if self.skeletons else None, int(self.threads_per_worker), inputs,
                        header["root_zyx"])
                for t in tiles if t.id not in done]
        print(f"{planned} tile(s) of {list(plan[0])} voxels (halo {list(plan[1])}), "
              f"{len(skipped)} skipped (no foreground within their halo), {len(done)} already committed; "
              f"{len(jobs)} to refine", file=sys.stderr)
        summaries: list[dict] = [r["summary"] for r in read_trace(out / TRACE) if r.get("type") == "tile_done"
                                 and r.get("tile") in done]
        with TraceWriter(out / TRACE, loop.secrets) as trace:
            # the plan's tile count and the skipped ones beside the plan, not in it (not a key a resumed run must
            # match: the same mask skips the same tiles, and a skipped tile's output is the empty region it read)
            trace.write({**header, "resumed": bool(done), "inputs": inputs, "tiles": planned,
                         "skipped tiles": len(skipped)})
            bar = tqdm(total=len(tiles), initial=len(tiles) - len(jobs), unit="tile", desc="refine",
                       disable=not bool(cfg.get("progress", True)), file=sys.stderr)
            attempt = uuid.uuid4().hex[:8]   # this driver's tasks: a killed driver's may still run on a live cluster
            # the run goes to every worker once (its roles and editor built there once), not with every tile
            shared = client.scatter(loop, broadcast=True, hash=False) if jobs else None
            futures = client.map(refine_tile, jobs, [shared] * len(jobs),
                                 key=[f"refine-tile-{j.tile.id}-{attempt}" for j in jobs], pure=False, retries=0)
            failed: list[str] = []
            for fut in as_completed(futures):
                try:
                    summary = fut.result()
                except RoleError as exc:  # the model server is down for every tile: stop asking it
                    client.cancel(futures)
                    bar.close()
                    raise RoleError(f"{exc} ({len(summaries)} of {len(tiles)} tile(s) to refine committed; run "
                                    "again to resume)") from None
                except Exception as exc:  # noqa: BLE001 - a tile's error is reported, the others finish
                    failed.append(f"{type(exc).__name__}: {exc}")
                    continue
                trace.write({"type": "tile_done", "tile": summary["tile"], "summary": summary})
                summaries.append(summary)
                bar.update()
                bar.set_postfix(accepted=sum(s.get("accepted", 0) for s in summaries))
            bar.close()
            if failed:
                raise TileFailure(f"{len(failed)} tile(s) failed (committed tiles are kept; run again to resume): "
                                  f"{failed[0]}")
            levels, figures = self._finish(out, stats, spacing, mask)
            seconds = time.perf_counter() - t0
            summary = {**self._summary(cfg, image, summaries, levels, seconds, out, loop, planned, len(skipped)),
                       **figures}
            trace.write({"type": "done", "summary": summary})
        print(f"refined {cfg.mask}: {summary['tiles']} tile(s) ({len(skipped)} empty, skipped), "
              f"{summary['accepted']} edit(s) accepted, "
              f"{summary['rejected']} rejected, {summary['escalated']} escalated; {summary['seconds']:.1f} s -> "
              f"{out / STORE}")
        return summary

    # ------------------------------------------------------------------------------------------ pieces
    def _header(self, cfg: Any, image: ZarrSource, mask: ZarrSource, loop: RefineRun, stats: dict,
                plan: tuple) -> dict:
        """The run's trace header, after the checks the global pass makes possible (a binary mask, a finite
        image)."""
        if not stats["binary"]:
            raise InputError(f"mask is not binary: found {stats['mask_values']} distinct values; pass a 0/1 or "
                             "0/255 mask", cfg.mask)
        if not stats["finite"]:
            raise InputError("the image holds NaN/inf voxels; clean or clip it first", cfg.image)
        return loop.header({"path": image.path, "shape": list(image.shape), "dtype": image.dtype,
                            "min": stats["lo"], "max": stats["hi"], "sum": stats["image_sum"]},
                           {"path": mask.path, "shape": list(mask.shape), "foreground": stats["foreground"]},
                           engine="dask", plan={"tile": list(plan[0]), "halo": list(plan[1]),
                                                "chunks": list(plan[2])}, root_zyx=listed(soma_root(cfg)))

    def _finish(self, out: Path, stats: dict, spacing: tuple, mask: ZarrSource) -> tuple[int, dict]:
        """After the last tile: the pyramid, the merged skeleton and the overview in ``.work``, then moved into
        ``out`` together; returns the pyramid's levels and the skeleton's (and components') figures."""
        work = out / WORK
        levels = finish_pyramid(work / STORE, spacing, self.pyramid_min_side)
        skeleton = self._merged_skeleton(work, spacing) if self.skeletons else {}
        if self.overview:
            self._overview(work, stats, work / STORE)
        for name in OUTPUTS:
            if (work / name).exists():
                shutil.rmtree(out / name, ignore_errors=True)
                (work / name).replace(out / name)
        shutil.rmtree(work, ignore_errors=True)
        counts = _components(mask, out / STORE / "0") if self.components else {}
        return levels, {**skeleton, **counts}

    def _client(self) -> tuple[Any, Any]:
        """A client of the cluster at ``address``, else of a new ``LocalCluster`` (its dashboard link printed)."""
        from dask.distributed import Client, LocalCluster

        for name in ("distributed", "bokeh", "tornado"):  # under Hydra's INFO root logger they print every step
            logging.getLogger(name).setLevel(logging.WARNING)
        if self.address:
            try:
                client = Client(self.address, timeout="30s")
            except OSError as exc:
                raise InputError(f"no Dask scheduler answers at executor.address={self.address} ({exc})") from None
            cluster = None
        else:
            cluster = LocalCluster(n_workers=int(self.n_workers), threads_per_worker=int(self.threads_per_worker),
                                   memory_limit=self.memory_limit, dashboard_address=self.dashboard_address or ":0",
                                   processes=True, silence_logs=logging.ERROR)
            client = Client(cluster)
        print(f"Dask dashboard: {client.dashboard_link}", file=sys.stderr, flush=True)
        return client, cluster

    def _stats(self, image: ZarrSource, mask: ZarrSource) -> dict:
        """One chunked pass over both inputs: the image's min, max, sum and finiteness, the mask's distinct
        values, foreground and foreground box per chunk (the tiles to skip), and (for the overview) both z-MIPs
        pooled to at most 1024 pixels a side."""
        import dask
        import dask.array as da

        img, msk = image.as_dask(), mask.as_dask()
        todo: dict[str, Any] = {"lo": img.min(), "hi": img.max(), "image_sum": img.sum(dtype=np.float64),
                                "values": da.unique(msk), "foreground": (msk != 0).sum(), "boxes": chunk_boxes(msk)}
        todo["finite"] = da.isfinite(img).all() if np.issubdtype(img.dtype, np.floating) else True
        if self.overview:
            todo["image_mip"] = _pooled_mip(img)
            todo["mask_mip"] = _pooled_mip(msk != 0)
        got = dict(zip(todo, dask.compute(*todo.values())))
        values = np.asarray(got.pop("values"))
        got.update(lo=float(got["lo"]), hi=float(got["hi"]), image_sum=float(got["image_sum"]),
                   foreground=int(got["foreground"]), finite=bool(got["finite"]), mask_values=len(values),
                   binary=len(values) == 1 or (len(values) == 2 and values[0] == 0))
        return got

    def _claim(self, out: Path, header: dict, resume: bool, overwrite: bool) -> tuple[set[int], dict | None]:
        """Committed tiles to skip (and the summary if the run already finished), after clearing whatever of
        an earlier run cannot be reused. Another run's outputs are refused unless ``overwrite``."""
        records = read_trace(out / TRACE) if (out / TRACE).exists() else []
        runs = [r for r in records if r.get("type") == "run"]
        ours = bool(runs) and all(runs[-1].get(k) == header.get(k) for k in MATCH_KEYS)
        found = [n for n in RUN_FILES if (out / n).exists()]
        if found and not ours and not overwrite:
            why = "other inputs or settings"
            if runs and runs[-1].get("spacing") != header.get("spacing"):
                why = differences({"spacing": runs[-1].get("spacing"), "spacing_from": runs[-1].get("spacing_from",
                                   "source not recorded")}, {"spacing": header["spacing"],
                                                             "spacing_from": header["spacing_from"]})[0]
            raise InputError(f"holds the outputs of another run ({', '.join(found)}: {why}); "
                             "pass overwrite=true to replace them, or choose another out=", out)
        if ours and resume:
            ends = [r for r in records if r.get("type") == "done"]
            if ends and records[-1].get("type") == "done" and (out / STORE).exists():
                return set(), ends[-1]["summary"]
            if (out / WORK / STORE).exists():
                done = {int(r["tile"]) for r in records if r.get("type") == "tile_done"}
                print(f"resuming from {out / TRACE} ({len(done)} committed tile(s) taken from it)", file=sys.stderr)
                for name in OUTPUTS:
                    _remove(out / name)
                return done, None
        for name in RUN_FILES:
            _remove(out / name)
        _remove(out / WORK)
        return set(), None

    def _merged_skeleton(self, work: Path, spacing: tuple) -> dict:
        """``refined_skeleton.swc``: every tile's skeleton in one SWC, pieces joined only across tile borders
        (:mod:`~neurorefiner.refine.whole_volume.skeleton_merge`); returns its counts for the summary."""
        tree, counts = merge_tile_skeletons(sorted((work / "skeletons").glob("tile_*.swc")), spacing)
        write_swc(work / SKELETON, tree, [
            "neurorefiner refine.py executor=dask: kimimaro skeletons of the refined mask's tiles, joined where a "
            f"piece crosses a tile border; x y z and radius in um (spacing z,y,x = {list(spacing)} um)",
            f"{counts['pieces']} piece(s) from {counts['pieces in tiles']} in tiles ({counts['border joins']} "
            "border joins)"])
        return {"skeleton pieces": counts["pieces"], "skeleton border joins": counts["border joins"]}

    def _overview(self, work: Path, stats: dict, store: Path) -> None:
        """``overview.png``: z-MIPs of the image, the initial mask and the refined mask, side by side."""
        import dask.array as da
        import zarr
        from PIL import Image

        from neurorefiner.topology.views import side_by_side, to_uint8

        refined = _pooled_mip(da.from_zarr(zarr.open_array(str(store / "0"), mode="r")) != 0).compute()
        picture = side_by_side([stats["image_mip"], stats["mask_mip"].astype(np.float32),
                                refined.astype(np.float32)])
        with atomic_path(work / "overview.png") as tmp:
            # a grey PNG by Pillow: png_bytes's pixels without importing matplotlib (about a second a run)
            Image.fromarray(to_uint8(picture)).save(tmp, format="PNG")

    def _summary(self, cfg: Any, image: ZarrSource, tiles: list[dict], levels: int, seconds: float,
                 out: Path, run: RefineRun, planned: int, skipped: int) -> dict:
        """The run's figures; ``tiles`` are the committed tiles' summaries, of ``planned`` tiles of which
        ``skipped`` held no foreground within their halo."""
        peaks: dict[int, int] = {}
        for s in tiles:
            pid = int(s.get("worker_pid", 0))
            peaks[pid] = max(peaks.get(pid, 0), int(s.get("peak_rss", 0)))
        total = {k: sum(int(s.get(k, 0)) for s in tiles) for k in ("accepted", "rejected", "escalated",
                                                                    "voxels before", "voxels after")}
        return {"image": str(cfg.image), "mask": str(cfg.mask), "shape": list(image.shape), "engine": "dask",
                "spacing (z, y, x) um": list(run.spacing), "spacing from": run.spacing_from,
                "tiles": planned, "skipped tiles": skipped,
                "refined tiles": sum(s.get("status") == "refined" for s in tiles), **total,
                "pyramid levels": levels, "seconds": round(seconds, 2),
                "peak worker memory GiB": {str(pid): round(v / 2**30, 3) for pid, v in sorted(peaks.items())},
                "output": str(out / STORE)}


class TileFailure(RuntimeError):
    """A tile's task raised; the committed tiles stay, and running again resumes."""


def _components(mask: ZarrSource, refined: Path) -> dict:
    """Betti-0 of the whole volume before and after: 26-connected components counted by ``dask_image``'s
    chunked ``ndmeasure.label`` (labels per chunk, merged across chunk faces), never a whole label volume."""
    import dask
    import dask.array as da
    import zarr
    from dask_image.ndmeasure import label

    cube = np.ones((3, 3, 3), bool)
    _, before = label(mask.as_dask() != 0, structure=cube)
    _, after = label(da.from_zarr(zarr.open_array(str(refined), mode="r")) != 0, structure=cube)
    before, after = dask.compute(before, after)
    return {"components before": int(before), "components after": int(after)}


def _pooled_mip(arr: Any, side: int = 1024) -> Any:
    """A z-MIP of a Dask array, max-pooled in y and x to at most ``side`` pixels (the driver holds only that)."""
    import dask.array as da

    f = [1, max(1, -(-arr.shape[1] // side)), max(1, -(-arr.shape[2] // side))]
    if f[1] > 1 or f[2] > 1:
        pad = [(0, 0), (0, (-arr.shape[1]) % f[1]), (0, (-arr.shape[2]) % f[2])]
        arr = da.coarsen(pool_max, da.pad(arr, pad) if any(p for _, p in pad) else arr, {1: f[1], 2: f[2]})
    return arr.max(axis=0)


def listed(root: Sequence[float] | None) -> list[float] | None:
    """A root as the trace's JSON holds it (a list), so a resumed run's header compares equal."""
    return None if root is None else [float(v) for v in root]


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
