"""Evaluation runner: for each method and case, get the mask, reconstruct it with the configured tracer
(``cfg.tracing``), score it with the configured metrics (``cfg.metrics``) against the gold SWC, and write
per-volume rows (CSV) and the paper-style summary (markdown).

Methods come from a registry of config nodes (:mod:`neurorefiner.evaluation.methods`, ``conf/method/``): each
builds a callable that refines the segmenter's initial mask (``initial`` keeps it as it is, ``classical`` and
``neurorefiner`` refine it, ``gold_mask`` is the rasterised gold tree, an upper bound that checks the tracing
and metrics chain). Initial masks are made and cached on first use with the shipped checkpoint
(:mod:`neurorefiner.inference.init_masks`). Protocols: ``full_volume`` lets APP2 pick its root;
``root_seeded`` starts it at the mask voxel nearest the gold root (the DIADEM protocol: the metric treats the
root as given). A finished (settings, split, segmenter, method settings, protocol, case) row is read back from
its file, so an interrupted run resumes, and rows made under other tracing, metric or method settings are
never reused. Volumes run in parallel as a Hydra multirun over ``cases`` (``hydra/launcher=joblib``) into one
``out_dir``; a plain run afterwards reads every row back and writes the tables. Any other multirun (e.g. over
``method_registry.neurorefiner.t_max``) gets one table of all its jobs in the sweep dir from the rows each
job returns (:mod:`neurorefiner.evaluation.sweep`). Rows of one method under different settings are never
averaged together (:func:`neurorefiner.evaluation.tables.label_methods`).

Besides the rows: each method's mask is written as a compressed TIFF (``save_masks``, default on:
``<out_dir>/masks/<split>/<segmenter>/<method>-<key>/<case>.tif``, opens in Fiji and napari) and one
comparison figure per volume in the paper's Figure 4 style (``figures``, default on:
``<out_dir>/figures/<split>/<segmenter>/<case>.png``, :mod:`neurorefiner.evaluation.figures`). A volume whose
rows are read back still gets its figure, from the masks an earlier run saved; a method with no saved mask
gets a panel saying so. With ``logger`` set (``conf/logger/``, e.g. ``logger=wandb``, offline by default) the
per-volume rows, the summary and the figures go to the experiment loggers
(:mod:`neurorefiner.evaluation.run_log`); without it nothing is built or imported.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError
from neurorefiner.evaluation.figures import zmip
from neurorefiner.evaluation.methods import build_method, method_key, method_node
from neurorefiner.evaluation.paper_tables import provenance, trace_dir
from neurorefiner.evaluation.tables import label_methods, markdown_table, summarize, write_rows_csv
from neurorefiner.io import read_mask, write_volume
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.tracing.seeding import marker_nearest_root

MaskSource = Callable[[Case, np.ndarray], np.ndarray]
PROTOCOLS = ("full_volume", "root_seeded")


def initial_mask(dataset: str, segmenter: str, split: str, dataset_kwargs: dict[str, Any] | None = None,
                 only: Sequence[str] | None = None) -> MaskSource:
    """The segmenter's masks of the split (of the cases named in ``only``: a ``limit=1`` run must not segment
    the whole split first), made once with its shipped checkpoint and cached."""
    cache: dict[str, Path] = {}

    def source(case: Case, image: np.ndarray) -> np.ndarray:
        if not cache:
            from neurorefiner.inference.init_masks import write_init_masks

            names = None if only is None else list(only)
            paths = write_init_masks(dataset, segmenter, split=split, dataset_kwargs=dataset_kwargs, only=names)
            cache.update({p.stem: p for p in paths})
        path = cache.get(case.name)
        if path is None or not path.exists():
            raise InputError(f"no initial mask for {case.name} after making the split's masks", path)
        return read_mask(path).load()

    return source


def cached_initial_mask(dataset: str, segmenter: str) -> MaskSource:
    """The segmenter's masks as far as the cache already holds them, never made: a figure of a run whose
    methods need no initial mask (``gold_mask``) must not segment the whole split to draw one panel."""
    from neurorefiner.paths import init_mask_path

    def source(case: Case, image: np.ndarray | None) -> np.ndarray:
        path = init_mask_path(dataset, segmenter, case.name)
        if not path.exists():
            raise InputError("not made in this run (no method needed it) and not in the cache", path)
        return read_mask(path).load()

    return source


def gold_mask() -> MaskSource:
    """The rasterised gold tree itself: an upper bound that checks the tracing + metrics chain."""
    return lambda case, image: case.label(image.shape)


def settings_key(cfg: DictConfig) -> str:
    """A short digest of the tracing and metric settings: rows are only reused under the same ones."""
    blob = json.dumps({"tracing": OmegaConf.to_container(cfg.tracing, resolve=True),
                       "metrics": OmegaConf.to_container(cfg.metrics, resolve=True)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def score_case(mask: np.ndarray, case: Case, spacing: Any, tracer: Callable, scorer: Callable,
               protocol: str) -> dict[str, float]:
    """One row's metrics: trace ``mask`` (seeded at the gold root for ``root_seeded``) and score the trace."""
    gold = case.gold()
    kwargs = {}
    if protocol == "root_seeded":
        kwargs["marker"] = marker_nearest_root(mask, gold, spacing)
    pred = tracer(np.asarray(mask) > 0, spacing, **kwargs)
    return {k: float(v) for k, v in scorer(gold, pred, spacing).items()}


def _select_cases(cfg: DictConfig, cases: list[Case]) -> list[Case]:
    wanted = cfg.get("cases")
    if wanted:
        wanted = [str(w) for w in ([wanted] if isinstance(wanted, str) else wanted)]
        known = {c.name for c in cases}
        missing = [w for w in wanted if w not in known]
        if missing:
            raise InputError(f"case(s) {missing} not in split {cfg.split}; it holds {', '.join(sorted(known))}")
        cases = [c for c in cases if c.name in wanted]
    if cfg.get("limit"):
        cases = cases[: int(cfg.limit)]
    return cases


def evaluate(cfg: DictConfig, dataset, cases: list[Case],  # type: ignore[no-untyped-def]
             loggers: list[Any] | None = None) -> list[dict]:
    """One row per (split, segmenter, method, protocol, volume), each with every metric and the method's and
    the scoring's seconds; rows already made under the same settings are read back, not recomputed.
    ``loggers``: experiment loggers to send the results to (None: built from ``cfg.logger``, none if unset)."""
    from hydra.utils import instantiate

    protocols = list(cfg.get("protocols") or ["full_volume"])
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown:
        raise InputError(f"unknown protocol(s) {unknown}; use {', '.join(PROTOCOLS)}")
    table = cfg.get("table")
    methods = [str(m) for m in cfg.methods]
    if table is not None and table.get("requires_server"):
        why = server_answers(str(cfg.agent.get("base_url", "")))
        if why is not None:
            why += "; start one (make serve-vlm prints the command) and rerun"
            methods = [m for m in methods if not needs_server(method_node(cfg, m))]
            if not methods:
                from neurorefiner.evaluation.paper_tables import write_not_run

                write_not_run(cfg, dataset.name, why)
                return []
            # the rows that need no server (the initial masks) still run; the table says why the others did not
            OmegaConf.set_struct(cfg, False)
            cfg.methods, cfg.table.not_run_reason = methods, why
    nodes = {m: method_node(cfg, m) for m in methods}  # unknown names fail before any work
    tracer, scorer = instantiate(cfg.tracing), instantiate(cfg.metrics)
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = _select_cases(cfg, cases)
    rows: list[dict] = []
    rows_dir = out_dir / "rows" / settings_key(cfg) / str(cfg.split) / str(cfg.segmenter)
    ds_kwargs = {k: v for k, v in OmegaConf.to_container(cfg.dataset, resolve=True).items()
                 if k not in ("_target_", "name")}
    progress = bool(cfg.get("progress", True))
    bar = tqdm(total=len(methods) * len(cases), desc=f"{dataset.name}/{cfg.split}/{cfg.segmenter}", unit="vol",
               disable=not progress)
    initial: MaskSource | None = None
    commit = provenance("")["commit"]  # the code a row was made with (rows are reused across commits)
    figures, save_masks = bool(cfg.get("figures", True)), bool(cfg.get("save_masks", True))
    masks_dir = out_dir / "masks" / str(cfg.split) / str(cfg.segmenter)
    mips: dict[tuple[str, str], np.ndarray] = {}  # (method or "", case) -> z-MIP, "" = the initial mask
    image_mips: dict[str, tuple[np.ndarray, tuple[int, ...]]] = {}  # case -> (image z-MIP, stack shape)
    for name in methods:
        node, key = nodes[name], method_key(nodes[name])
        method = None
        for case in cases:
            bar.set_postfix_str(f"{name} {case.name}")
            files = {p: rows_dir / f"{name}-{key}__{p}__{case.name}.json" for p in protocols}
            todo = [p for p in protocols if not files[p].exists()]
            rows.extend(json.loads(files[p].read_text()) for p in protocols if p not in todo)
            if todo:
                if method is None:
                    traces = trace_dir(out_dir / "traces", str(cfg.split), str(cfg.segmenter), name, key)
                    method = build_method(node, traces)
                vol = case.image()
                spacing = case.spacing or vol.spacing
                image = vol.normalized()
                init = None
                if getattr(method, "needs_initial", True):
                    if initial is None:
                        initial = initial_mask(dataset.name, cfg.segmenter, cfg.split, ds_kwargs,
                                               [c.name for c in cases])
                    init = np.asarray(initial(case, image), dtype=bool)
                t0 = time.perf_counter()
                mask = np.asarray(method(image, init, case, spacing=spacing), dtype=bool)
                seconds_method = time.perf_counter() - t0
                if save_masks:
                    write_volume(masks_dir / f"{name}-{key}" / f"{case.name}.tif", mask, spacing=spacing)
                if figures:  # the projections are all a figure needs: kept for every case, not the stacks
                    mips[(name, case.name)] = zmip(mask)
                    image_mips.setdefault(case.name, (zmip(image), tuple(image.shape)))
                    if init is not None:
                        mips.setdefault(("", case.name), zmip(init))
                extra = dict(getattr(method, "last_info", {}) or {})
                for protocol in todo:
                    t1 = time.perf_counter()
                    scores = score_case(mask, case, spacing, tracer, scorer, protocol)
                    row = {"dataset": dataset.name, "split": case.split, "case": case.name, "method": name,
                           "protocol": protocol, "segmenter": cfg.segmenter, **scores,
                           "seconds_method": round(seconds_method, 2),
                           "seconds_score": round(time.perf_counter() - t1, 2), "method_key": key,
                           "settings_key": settings_key(cfg), "commit": commit, **extra}
                    files[protocol].parent.mkdir(parents=True, exist_ok=True)
                    with atomic_path(files[protocol]) as tmp:
                        tmp.write_text(json.dumps(row))
                    rows.append(row)
            bar.update()
    bar.close()
    label_methods(rows)  # "method (protocol)"; method[key] if one name ever came with two settings
    write_rows_csv(out_dir / "per_volume.csv", rows)
    summary = summarize(rows, group="method_protocol")
    table = markdown_table(summary, group="method_protocol")
    synthetic = dataset.name.startswith("synthetic") or dataset.name == "tiny"
    title = f"# {dataset.name} ({'SYNTHETIC data' if synthetic else 'real data'}), split {cfg.split}\n\n"
    write_text_atomic(out_dir / "table.md", title + table)
    print(title + table)
    made: dict[str, Path] = {}
    if figures:
        if initial is None:
            initial = cached_initial_mask(dataset.name, str(cfg.segmenter))
        made = write_figures(out_dir / "figures" / str(cfg.split) / str(cfg.segmenter), cases, methods,
                             {m: masks_dir / f"{m}-{method_key(nodes[m])}" for m in methods}, rows, mips,
                             image_mips, initial, str(cfg.segmenter), dataset.name)
    if loggers is None:
        from neurorefiner.training.loggers import build_loggers

        loggers = build_loggers(cfg)  # [] when cfg.logger is unset: nothing imported
    if loggers:
        from neurorefiner.evaluation.run_log import log_evaluation

        log_evaluation(loggers, rows, summary, made,
                       {"dataset": dataset.name, "split": str(cfg.split), "segmenter": str(cfg.segmenter),
                        "methods": methods, "protocols": protocols, "settings_key": settings_key(cfg),
                        "method_keys": {m: method_key(nodes[m]) for m in methods}, "commit": commit,
                        "out_dir": str(out_dir)})
    if cfg.get("table"):
        from neurorefiner.evaluation.paper_tables import write_paper_table

        write_paper_table(cfg, table_rows(cfg, out_dir / "rows" / settings_key(cfg) / str(cfg.split), rows), dataset)
    return rows


def write_figures(fig_dir: Path, cases: list[Case], methods: list[str], mask_dirs: dict[str, Path],
                  rows: list[dict], mips: dict[tuple[str, str], np.ndarray],
                  image_mips: dict[str, tuple[np.ndarray, tuple[int, ...]]],
                  initial: MaskSource | None, segmenter: str, dataset: str) -> dict[str, Path]:
    """One comparison figure per case (``<fig_dir>/<case>.png``): image, gold, the initial mask and each
    method's mask, from the projections this run kept, else the masks an earlier run saved under
    ``mask_dirs[method]``; a method with neither gets a panel that says why. Returns case -> figure path."""
    from neurorefiner.evaluation.figures import Panel, best_scores, write_comparison

    out: dict[str, Path] = {}
    for case in cases:
        if case.name in image_mips:
            image, shape = image_mips[case.name]
        else:
            vol = case.image()
            image, shape = zmip(vol.normalized()), tuple(vol.shape)
        gold = zmip(case.label(shape))
        panels = []
        if "initial" not in methods:
            init = mips.get(("", case.name))
            note = ""
            if init is None and initial is not None:
                try:
                    # the source reads the segmenter's cached mask, never the image
                    init = zmip(np.asarray(initial(case, None), bool))  # type: ignore[arg-type]
                except (InputError, FileNotFoundError) as exc:
                    note = f"initial mask not available: {exc}"
            panels.append(Panel(f"initial mask ({segmenter})", init, None, note))
        missing = []
        for name in methods:
            mip = mips.get((name, case.name))
            note = ""
            if mip is None:
                path = mask_dirs[name] / f"{case.name}.tif"
                if path.exists():
                    mip = zmip(read_mask(path).load())
                else:
                    missing.append(f"{name} ({path})")
                    note = "mask not available:\nits rows were read back\nfrom a run that saved no mask"
            panels.append(Panel(name, mip, best_scores(rows, name, case.name), note))
        if missing:
            print(f"figure {case.name}: no saved mask for {', '.join(missing)}: their rows were read back from a "
                  "run with save_masks=false (or older); delete those rows to recompute them and get the panel")
        out[case.name] = write_comparison(
            fig_dir / f"{case.name}.png", image, gold, panels,
            title=f"{dataset} / {case.split} / {case.name}  (initial masks: {segmenter})")
    if out:
        print(f"figures: {fig_dir}")
    return out


def table_rows(cfg: DictConfig, split_dir: Path, rows: list[dict]) -> list[dict]:
    """This run's rows plus every row already in ``split_dir`` (any segmenter, e.g. from a multirun over
    ``segmenter`` or ``cases``) made with the current settings of a method the config knows."""
    keys: dict[str, str] = {}
    out = {(r["segmenter"], r["method"], r["protocol"], r["case"]): r for r in rows}
    for path in sorted(split_dir.glob("*/*.json")):
        name = path.name.split("-", 1)[0]
        if name not in keys:
            try:
                keys[name] = method_key(method_node(cfg, name))
            except InputError:
                keys[name] = ""
        if not path.name.startswith(f"{name}-{keys[name]}__"):
            continue
        row = json.loads(path.read_text())
        out.setdefault((row["segmenter"], row["method"], row["protocol"], row["case"]), row)
    return list(out.values())


def needs_server(node: DictConfig) -> bool:
    """Whether a method's agents talk to a model server (its agent backend, after its overrides, is ``vlm``)."""
    agent = node.get("agent")
    if not agent:
        return False
    backend = (node.get("agent_overrides") or {}).get("backend", agent.get("backend"))
    return str(backend) == "vlm"


def server_answers(base_url: str, timeout: float = 3.0) -> str | None:
    """None when an OpenAI-compatible server answers ``GET <base_url>/models``, else why not."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status} from {base_url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no VLM server answered at {base_url} ({getattr(exc, 'reason', exc)})"
