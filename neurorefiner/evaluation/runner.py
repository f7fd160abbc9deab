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
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError
from neurorefiner.evaluation.methods import build_method, method_key, method_node
from neurorefiner.evaluation.paper_tables import provenance
from neurorefiner.evaluation.tables import label_methods, markdown_table, summarize, write_rows_csv
from neurorefiner.io import read_mask
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.tracing.seeding import marker_nearest_root

MaskSource = Callable[[Case, np.ndarray], np.ndarray]
PROTOCOLS = ("full_volume", "root_seeded")


def initial_mask(dataset: str, segmenter: str, split: str, dataset_kwargs: dict[str, Any] | None = None) -> MaskSource:
    """The segmenter's masks of the split, made once with its shipped checkpoint and cached."""
    cache: dict[str, Path] = {}

    def source(case: Case, image: np.ndarray) -> np.ndarray:
        if not cache:
            from neurorefiner.inference.init_masks import write_init_masks

            paths = write_init_masks(dataset, segmenter, split=split, dataset_kwargs=dataset_kwargs)
            cache.update({p.stem: p for p in paths})
        path = cache.get(case.name)
        if path is None or not path.exists():
            raise InputError(f"no initial mask for {case.name} after making the split's masks", path)
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


def evaluate(cfg: DictConfig, dataset, cases: list[Case]) -> list[dict]:  # type: ignore[no-untyped-def]
    """One row per (split, segmenter, method, protocol, volume), each with every metric and the method's and
    the scoring's seconds; rows already made under the same settings are read back, not recomputed."""
    from hydra.utils import instantiate

    protocols = list(cfg.get("protocols") or ["full_volume"])
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown:
        raise InputError(f"unknown protocol(s) {unknown}; use {', '.join(PROTOCOLS)}")
    table = cfg.get("table")
    if table is not None and table.get("requires_server"):
        why = server_answers(str(cfg.agent.get("base_url", "")))
        if why is not None:
            from neurorefiner.evaluation.paper_tables import write_not_run

            write_not_run(cfg, dataset.name, why + "; start one (make serve-vlm prints the command) and rerun")
            return []
    methods = [str(m) for m in cfg.methods]
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
                    method = build_method(node, out_dir / "traces" / f"{name}-{key}")
                vol = case.image()
                spacing = case.spacing or vol.spacing
                image = vol.normalized()
                init = None
                if getattr(method, "needs_initial", True):
                    if initial is None:
                        initial = initial_mask(dataset.name, cfg.segmenter, cfg.split, ds_kwargs)
                    init = np.asarray(initial(case, image), dtype=bool)
                t0 = time.perf_counter()
                mask = np.asarray(method(image, init, case, spacing=spacing), dtype=bool)
                seconds_method = time.perf_counter() - t0
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
    table = markdown_table(summarize(rows, group="method_protocol"), group="method_protocol")
    synthetic = dataset.name.startswith("synthetic") or dataset.name == "tiny"
    title = f"# {dataset.name} ({'SYNTHETIC data' if synthetic else 'real data'}), split {cfg.split}\n\n"
    write_text_atomic(out_dir / "table.md", title + table)
    print(title + table)
    if cfg.get("table"):
        from neurorefiner.evaluation.paper_tables import write_paper_table

        write_paper_table(cfg, table_rows(cfg, out_dir / "rows" / settings_key(cfg) / str(cfg.split), rows), dataset)
    return rows


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


def server_answers(base_url: str, timeout: float = 3.0) -> str | None:
    """None when an OpenAI-compatible server answers ``GET <base_url>/models``, else why not."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status} from {base_url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no VLM server answered at {base_url} ({getattr(exc, 'reason', exc)})"
