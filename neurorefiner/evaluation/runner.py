"""The evaluation protocol: for each method and case, get the mask, reconstruct it with the configured tracer
(``cfg.tracing``), score it with the configured metrics (``cfg.metrics``) against the gold SWC, and write
per-volume rows (CSV) and the paper-style summary (markdown).

Methods come from a registry of config nodes (:mod:`neurorefiner.evaluation.methods`, ``conf/method/``): each
builds a callable that refines the segmenter's initial mask (``initial`` keeps it as it is, ``classical`` and
``neurorefiner`` refine it, ``gold_mask`` is the rasterised gold tree, an upper bound that checks the tracing
and metrics chain). Protocols: ``full_volume`` lets APP2 pick its root; ``root_seeded`` starts it at the mask
voxel nearest the gold root (the DIADEM protocol: the metric treats the root as given). Volumes run in parallel
as a Hydra multirun over ``cases`` (``hydra/launcher=joblib``) into one ``out_dir``; a plain run afterwards reads
every row back and writes the tables. Any other multirun (e.g. over ``method_registry.neurorefiner.t_max``) gets
one table of all its jobs in the sweep dir from the rows each job returns (:mod:`neurorefiner.evaluation.sweep`).
Rows of one method under different settings are never averaged together
(:func:`neurorefiner.evaluation.tables.label_methods`).

This module is the protocol only; around it, each in its own module: the run's plan, settled before any work
(:mod:`.plan`), the initial masks, made on first use (:mod:`.initial_masks`), the keys a finished row is kept
and read back under, so an interrupted run resumes and rows of other settings, code or weights are never reused
(:mod:`.cache_keys`), the Figure 4-style PNG per volume (:mod:`.run_figures`, ``figures``, default on) and the
experiment loggers (:mod:`.run_log`, ``logger=wandb``; without it nothing is built or imported). Each method's
mask is written as a compressed TIFF (``save_masks``, default on:
``<out_dir>/masks/<split>/<segmenter>/<method>-<key>/<case>.tif``, opens in Fiji and napari).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from neurorefiner.data.cases import Case
from neurorefiner.evaluation.cache_keys import table_rows
from neurorefiner.evaluation.initial_masks import InitialMasks
from neurorefiner.evaluation.methods import build_method
from neurorefiner.evaluation.paper_tables import provenance, trace_dir
from neurorefiner.evaluation.plan import Plan, check_protocols, is_synthetic_dataset, make_plan, runnable_methods
from neurorefiner.evaluation.run_figures import Projections, write_run_figures
from neurorefiner.evaluation.run_log import send_to_loggers
from neurorefiner.evaluation.tables import label_methods, markdown_table, summarize, write_rows_csv
from neurorefiner.io import write_volume
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.paths import segmenter_dirname
from neurorefiner.tracing.seeding import marker_nearest_root


def score_case(mask: np.ndarray, case: Case, spacing: Any, tracer: Callable, scorer: Callable,
               protocol: str) -> dict[str, float]:
    """One row's metrics: trace ``mask`` (seeded at the gold root for ``root_seeded``) and score the trace."""
    gold = case.gold()
    kwargs = {}
    if protocol == "root_seeded":
        kwargs["marker"] = marker_nearest_root(mask, gold, spacing)
    pred = tracer(np.asarray(mask) > 0, spacing, **kwargs)
    return {k: float(v) for k, v in scorer(gold, pred, spacing).items()}


@dataclass
class Outcome:
    """What the rows need from one (method, case): the mask, how long the method took, what it reported."""

    mask: np.ndarray
    seconds: float
    extra: dict
    init: np.ndarray | None
    image: np.ndarray
    spacing: Any


def run_method(method: Any, case: Case, initial: InitialMasks) -> Outcome:
    """method -> mask: one method on one case, from the normalised image and (when it needs one) the
    segmenter's initial mask, at the case's voxel size (the dataset's, else the file's calibration)."""
    vol = case.image()
    spacing = case.spacing or vol.spacing
    image = vol.normalized()
    init = initial(case, image) if getattr(method, "needs_initial", True) else None
    t0 = time.perf_counter()
    mask = np.asarray(method(image, init, case, spacing=spacing), dtype=bool)
    seconds = time.perf_counter() - t0
    return Outcome(mask, seconds, dict(getattr(method, "last_info", {}) or {}), init, image, spacing)


def score_rows(plan: Plan, name: str, case: Case, outcome: Outcome, protocols: list[str], tracer: Callable,
               scorer: Callable, commit: str) -> list[dict]:
    """mask -> trace -> score -> one row per protocol, each with every metric and both timings."""
    rows = []
    for protocol in protocols:
        t1 = time.perf_counter()
        scores = score_case(outcome.mask, case, outcome.spacing, tracer, scorer, protocol)
        rows.append({"dataset": plan.dataset, "split": case.split, "case": case.name, "method": name,
                     "protocol": protocol, "segmenter": plan.segmenter, **scores,
                     "seconds_method": round(outcome.seconds, 2),
                     "seconds_score": round(time.perf_counter() - t1, 2), "method_key": plan.keys[name],
                     "settings_key": plan.settings, "data_key": plan.data_key(case), "commit": commit,
                     **outcome.extra})
    return rows


def save_row(path: Path, row: dict) -> None:
    """Keep a finished row (atomically: an interrupted run never leaves half a row that would be reused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(row))


def current_row(path: Path, data_key: str) -> dict | None:
    """The row kept at ``path`` if it was made on the case's current data (:func:`case_data_key`), else None:
    a row of other volumes under the same case name, or from before rows carried the key, is made again."""
    if not path.exists():
        return None
    row = json.loads(path.read_text())
    return row if row.get("data_key") == data_key else None


def compute_rows(plan: Plan, tracer: Callable, scorer: Callable) -> tuple[list[dict], Projections, InitialMasks]:
    """The rows of every (method, case, protocol): read back when a row file exists, else computed
    (method -> mask -> trace -> score) and kept; masks saved as TIFF and projections kept for figures. A
    method is built once, for all its cases, and only when one of its rows is missing."""
    rows: list[dict] = []
    mips = Projections()
    initial = InitialMasks(plan.dataset, plan.segmenter, plan.split, plan.dataset_kwargs,
                           [c.name for c in plan.cases])
    commit = provenance("", plan.table_out)["commit"]  # the code a row was made with
    bar = tqdm(total=len(plan.methods) * len(plan.cases), desc=f"{plan.dataset}/{plan.split}/{plan.segmenter}",
               unit="vol", disable=not plan.progress)
    for name in plan.methods:
        method = None
        for case in plan.cases:
            bar.set_postfix_str(f"{name} {case.name}")
            files = plan.row_files(name, case.name)
            kept = {p: current_row(files[p], plan.data_key(case)) for p in plan.protocols}
            todo = [p for p in plan.protocols if kept[p] is None]
            rows.extend(row for row in kept.values() if row is not None)
            if todo:
                if method is None:  # built only when a row is missing (loading an editor costs seconds)
                    traces = trace_dir(plan.out_dir / "traces", plan.split, segmenter_dirname(plan.segmenter),
                                       name, plan.keys[name])
                    method = build_method(plan.nodes[name], traces)
                outcome = run_method(method, case, initial)
                saved = plan.mask_dir(name) / f"{case.name}.tif"
                if plan.save_masks:
                    write_volume(saved, outcome.mask, spacing=outcome.spacing)
                else:  # a mask saved with an earlier row no longer belongs to the row now kept under its name
                    saved.unlink(missing_ok=True)
                if plan.figures:
                    mips.keep(name, case, outcome.mask, outcome.image, outcome.init)
                for protocol, row in zip(todo, score_rows(plan, name, case, outcome, todo, tracer, scorer, commit)):
                    save_row(files[protocol], row)
                    rows.append(row)
            bar.update()
    bar.close()
    return rows, mips, initial


def write_summary(plan: Plan, rows: list[dict]) -> list[dict]:
    """per_volume.csv and table.md from the rows (title says SYNTHETIC or real from the dataset config)."""
    label_methods(rows)  # "method (protocol)"; method[key] if one name ever came with two settings
    write_rows_csv(plan.out_dir / "per_volume.csv", rows)
    summary = summarize(rows, group="method_protocol")
    table = markdown_table(summary, group="method_protocol")
    title = f"# {plan.dataset} ({'SYNTHETIC data' if plan.synthetic else 'real data'}), split {plan.split}\n\n"
    write_text_atomic(plan.out_dir / "table.md", title + table)
    print(title + table)
    return summary


def evaluate(cfg: DictConfig, dataset, cases: list[Case],  # type: ignore[no-untyped-def]
             loggers: list[Any] | None = None) -> list[dict]:
    """One row per (split, segmenter, method, protocol, volume), each with every metric and the method's and
    the scoring's seconds; rows already made under the same settings, method code and checkpoints are read
    back, not recomputed. Then the tables, figures and loggers read the rows.
    ``loggers``: experiment loggers to send the results to (None: built from ``cfg.logger``, none if unset)."""
    from hydra.utils import instantiate

    from neurorefiner.evaluation.paper_tables import check_table_destination

    check_protocols(cfg)
    if cfg.get("table"):
        check_table_destination(cfg)  # a committed table from a dirty tree fails now, not after the run
    methods, why = runnable_methods(cfg, [str(m) for m in cfg.methods])
    if not methods:
        from neurorefiner.evaluation.paper_tables import write_not_run

        write_not_run(cfg, dataset.name, str(why), synthetic=is_synthetic_dataset(cfg, dataset))
        return []
    plan = make_plan(cfg, dataset, cases, methods, why)
    tracer, scorer = instantiate(cfg.tracing), instantiate(cfg.metrics)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    rows, mips, initial = compute_rows(plan, tracer, scorer)
    summary = write_summary(plan, rows)
    figures = write_run_figures(plan, rows, mips, initial) if plan.figures else {}
    send_to_loggers(cfg, plan, rows, summary, figures, loggers)
    if cfg.get("table"):
        from neurorefiner.evaluation.paper_tables import write_paper_table

        write_paper_table(cfg, table_rows(cfg, plan.out_dir / "rows" / plan.settings / plan.split, rows,
                                          data_keys=plan.data_keys),
                          dataset, not_run_reason=plan.not_run_reason, synthetic=plan.synthetic)
    return rows
