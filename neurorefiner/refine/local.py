"""What ``refine.py`` runs on one volume: the loop, then the refined mask, its APP2 SWC, the trace and
the report in ``out``.

One output folder, one run. ``out`` is checked before anything is loaded and held by a lock
(:mod:`neurorefiner.refine.output_lock`) for the whole run. A trace already there from the same inputs,
voxel size and settings is resumed (finished rounds and blocks are taken from it, so the result is the one an
uninterrupted run gives); outputs of any other run are refused unless ``overwrite=true``, which removes
them first. The refined mask, SWC and report are written to a staging folder and moved in together at
the end, so a run that dies leaves the trace (to resume from) and no outputs, never a mix of old and new.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.loop import PriorRun
from neurorefiner.agents.trace import REQUESTS_DIR, read_trace
from neurorefiner.errors import InputError
from neurorefiner.io import Volume, write_swc, write_volume
from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.refine.output_lock import OutputLock, check_output_dir
from neurorefiner.refine.report import build_report
from neurorefiner.refine.run import RefineRun, differences, soma_root
from neurorefiner.topology.blocks import grid_blocks

TRACE = "trace.jsonl"
OUTPUTS = ("refined_mask.tif", "refined_mask.swc", "report.html")
STAGING = ".partial"
#: every name a run writes in ``out`` (``trace.jsonl.prev`` from earlier versions); nothing else is removed
RUN_FILES = (*OUTPUTS, TRACE, TRACE + ".prev")
#: an all-zero mask still gets every output (a pipeline waits for them), each saying so: the loop finds nothing
EMPTY_NOTE = "nothing to refine; the outputs are the input mask unchanged and an empty reconstruction"


def claim_folder(out: Path, header: dict, resume: bool, overwrite: bool) -> PriorRun | None:
    """Make ``out`` (already locked) this run's: the finished work to resume from, if any.

    Another run's trace or outputs are an :class:`InputError` unless ``overwrite``; every output of an
    earlier run is removed before the loop starts (its ``requests/`` too), so none can outlive a run that is
    killed."""
    trace = out / TRACE
    records = read_trace(trace) if trace.exists() else []
    runs = [r for r in records if r.get("type") == "run"]
    changed = differences(runs[-1], header) if runs else ["no run header"]
    ours = not changed
    found = [name for name in RUN_FILES if (out / name).exists() and (records or name != TRACE)]
    if found and not ours and not overwrite:
        why = "; ".join(changed) if runs else "other inputs or settings"
        raise InputError(f"holds the outputs of another run ({', '.join(found)}: {why}); pass overwrite=true to "
                         "replace them, or choose another out=", out)
    prior = None
    if ours and resume:
        finished = sum(r.get("type") == "block_done" for r in records)
        print(f"resuming from {trace} ({finished} finished block(s) taken from it)", file=sys.stderr)
        prior = PriorRun(records)
    for name in RUN_FILES if prior is None else OUTPUTS:
        (out / name).unlink(missing_ok=True)
    if prior is None:  # the old run's prompts and pictures would otherwise sit beside a trace that never asked them
        shutil.rmtree(out / REQUESTS_DIR, ignore_errors=True)
    shutil.rmtree(out / STAGING, ignore_errors=True)
    return prior


def refine_volume(image: Volume, mask: Volume, cfg: Any) -> dict:
    """Refine, write the outputs, return a summary (also printed). The run (:meth:`RefineRun.from_config`)
    settles the voxel size from ``cfg.spacing`` and the two files' calibration, so an uncalibrated stack without
    ``spacing=`` stops before any work. An empty mask gets the same outputs, unchanged, with a note
    (:data:`EMPTY_NOTE`): a pipeline that waits for ``refined_mask.tif`` must not wait forever."""
    out = check_output_dir(str(cfg.out))
    loop = RefineRun.from_config(cfg, image, mask)
    m = np.asarray(mask.load(), dtype=bool)
    with OutputLock(out, {"image": image.source, "mask": mask.source}):
        img = image.normalized()
        root = soma_root(cfg)
        header = loop.header(img, m, **({} if root is None else {"root_zyx": list(root)}))
        prior = claim_folder(out, header, bool(cfg.get("resume", True)), bool(cfg.get("overwrite", False)))
        t0 = time.perf_counter()
        result = loop.run(img, m, out / TRACE, {"image": image.source, "mask": mask.source}, prior, header,
                          progress=bool(cfg.get("progress", True)), root=root)
        total = time.perf_counter() - t0
        escalated = [{"block": b, **st} for b, items in sorted(result.escalated.items()) for st in items]
        note = {} if m.any() else {"note": EMPTY_NOTE}
        summary = {**note, "image": str(image.source), "mask": str(mask.source), "shape": list(m.shape),
                   "spacing (z, y, x) um": list(loop.spacing), "spacing from": loop.spacing_from,
                   "rounds": len(result.rounds), "converged": result.converged, **result.counts,
                   "voxels before": int(m.sum()), "voxels after": int(result.mask.sum()),
                   "seconds": round(total, 2), "seconds per role": result.seconds,
                   "max defects per round": loop.settings.max_defects_per_round, "roles": loop.settings.roles,
                   "escalated_blocks": escalated}
        _write_outputs(out, cfg, loop, img, m, result.mask, loop.spacing, summary)
    if not m.any():
        print(f"note: the mask {mask.source} is empty: {EMPTY_NOTE}")
    c = result.counts
    did = (f"the policy its refiner chose on validation ({c.get('policy_name', c['policy'])}; "
           f"+{c['voxels_added']} / -{c['voxels_removed']} voxels)" if "policy" in c else
           f"{len(result.rounds)} round(s), {c['accepted']} edit(s) accepted, {c['rejected']} rejected, "
           f"{c['escalated']} escalated{' (converged)' if result.converged else ''}")
    print(f"refined {mask.source}: {did}; spacing {tuple(loop.spacing)} um ({loop.spacing_from}); "
          f"{total:.1f} s -> {out}")
    return summary


def _write_outputs(out: Path, cfg: Any, loop: RefineRun, img: np.ndarray, before: np.ndarray,
                   after: np.ndarray, spacing: tuple, summary: dict) -> None:
    """Mask, SWC and report into ``out/.partial``, then moved into ``out`` together (all or nothing)."""
    staging = out / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        write_volume(staging / "refined_mask.tif", after, spacing=spacing)
        _trace_swc(cfg, after, spacing, staging / "refined_mask.swc")
        if cfg.get("report", True):
            s = loop.settings
            blocks = grid_blocks(before.shape, s.block_size, s.block_depth)
            html = build_report(read_trace(out / TRACE, repair=False), img, before, after, blocks, summary)
            for secret in loop.secrets:
                html = html.replace(secret, "<redacted>")
            write_text_atomic(staging / "report.html", html)
        for name in OUTPUTS:
            if (staging / name).exists():
                (staging / name).replace(out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _trace_swc(cfg: Any, mask: np.ndarray, spacing: tuple, path: Path) -> None:
    """APP2 on the refined mask with the project's tracing config (root from ``tracing.marker`` if set)."""
    from hydra.utils import instantiate

    from neurorefiner.io.swc import Tree

    if cfg.get("tracing") is None:
        return
    tracer = instantiate(cfg.tracing)
    tree = tracer(mask, spacing) if mask.any() else Tree.empty()
    write_swc(path, tree, extra_comments=[f"APP2 of the refined mask, spacing z,y,x = {tuple(spacing)} um"])
