"""What ``refine.py`` runs on one volume: the loop, then the refined mask, its APP2 SWC, the trace and
the report in ``out``.

A trace already in ``out`` from the same inputs and settings is resumed (finished rounds and blocks
are taken from it, so the result is the one an uninterrupted run gives); a trace from anything else is
kept beside as ``trace.jsonl.prev`` and a fresh one started.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.editor import LazyEditor, load_topo_refiner
from neurorefiner.agents.factory import build_agents
from neurorefiner.agents.loop import LoopSettings, PriorRun, run_header, run_loop, same_run
from neurorefiner.agents.report import build_report
from neurorefiner.agents.trace import TraceWriter, array_hash, read_trace
from neurorefiner.io import Volume, write_swc, write_volume
from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.topology.blocks import grid_blocks


def _container(node: Any) -> dict:
    from omegaconf import DictConfig, OmegaConf

    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node or {})


def loop_settings(cfg: Any) -> LoopSettings:
    loop = _container(cfg.get("loop"))
    return LoopSettings(t_max=int(cfg.t_max), **loop)


def _prior(trace_path: Path, header: dict, resume: bool) -> PriorRun | None:
    if not trace_path.exists():
        return None
    records = read_trace(trace_path)
    runs = [r for r in records if r.get("type") == "run"]
    if resume and runs and same_run(runs[-1], header):
        finished = sum(r.get("type") == "block_done" for r in records)
        print(f"resuming from {trace_path} ({finished} finished block(s) taken from it)", file=sys.stderr)
        return PriorRun(records)
    os.replace(trace_path, trace_path.with_name(trace_path.name + ".prev"))
    return None


def refine_volume(image: Volume, mask: Volume, cfg: Any) -> dict:
    """Refine, write the outputs, return a summary (also printed)."""
    out = Path(str(cfg.out))
    spacing = tuple(float(v) for v in cfg.spacing) if cfg.get("spacing") else image.spacing
    m = np.asarray(mask.load(), dtype=bool)
    if not m.any():
        print(f"nothing to refine: the mask {mask.source} is empty")
        return {"status": "nothing to refine"}
    settings = loop_settings(cfg)
    agents, secrets, described = build_agents(cfg.agent)
    editor = LazyEditor(_editor_factory(cfg))
    img = image.normalized()
    out.mkdir(parents=True, exist_ok=True)
    trace_path = out / "trace.jsonl"
    header = run_header(img, m, settings, described)
    prior = _prior(trace_path, header, bool(cfg.get("resume", True)))
    t0 = time.perf_counter()
    with TraceWriter(trace_path, secrets) as trace:
        trace.write({**header, "resumed": prior is not None, "image": str(image.source), "mask": str(mask.source)})
        result = run_loop(img, m, agents, editor, settings, spacing, emit=trace.write, prior=prior,
                          progress=bool(cfg.get("progress", True)))
        total = time.perf_counter() - t0
        trace.write({"type": "done", "mask_hash": array_hash(result.mask), "seconds": round(total, 3),
                     "counts": result.counts, "converged": result.converged})
    write_volume(out / "refined_mask.tif", result.mask, spacing=spacing)
    swc_path = out / "refined_mask.swc"
    _trace_swc(cfg, result.mask, spacing, swc_path)
    escalated = [{"block": b, **st} for b, items in sorted(result.escalated.items()) for st in items]
    summary = {"image": str(image.source), "mask": str(mask.source), "shape": list(m.shape),
               "rounds": len(result.rounds), "converged": result.converged, **result.counts,
               "voxels before": int(m.sum()), "voxels after": int(result.mask.sum()),
               "seconds": round(total, 2), "seconds per role": result.seconds,
               "max defects per round": settings.max_defects_per_round, "roles": settings.roles,
               "escalated_blocks": escalated}
    if cfg.get("report", True):
        blocks = grid_blocks(m.shape, settings.block_size, settings.block_depth)
        html = build_report(read_trace(trace_path, repair=False), img, m, result.mask, blocks, summary)
        for s in secrets:
            html = html.replace(s, "<redacted>")
        write_text_atomic(out / "report.html", html)
    print(f"refined {mask.source}: {len(result.rounds)} round(s), {result.counts['accepted']} edit(s) accepted, "
          f"{result.counts['rejected']} rejected, {result.counts['escalated']} escalated"
          f"{' (converged)' if result.converged else ''}; {total:.1f} s -> {out}")
    return summary


def _editor_factory(cfg: Any) -> Any:
    """A no-argument callable that builds the editor (``cfg.editor._target_``, default the shipped one)."""
    from hydra.utils import instantiate

    node = cfg.get("editor")
    if node is None or node.get("_target_") is None:
        return lambda: load_topo_refiner(**_container(node))
    return instantiate(node)


def _trace_swc(cfg: Any, mask: np.ndarray, spacing: tuple, path: Path) -> None:
    """APP2 on the refined mask with the project's tracing config (root from ``tracing.marker`` if set)."""
    from hydra.utils import instantiate

    from neurorefiner.io.swc import Tree

    if cfg.get("tracing") is None:
        return
    tracer = instantiate(cfg.tracing)
    tree = tracer(mask, spacing) if mask.any() else Tree.empty()
    write_swc(path, tree, extra_comments=[f"APP2 of the refined mask, spacing z,y,x = {tuple(spacing)} um"])
