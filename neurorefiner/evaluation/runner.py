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
from dataclasses import dataclass, field
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
from neurorefiner.inference.init_masks import file_sha256, preset_name
from neurorefiner.io import read_mask, write_volume
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.paths import segmenter_dirname
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


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a file, computed once per (path, size, mtime) in a process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_sha256(path)
    return _DIGESTS[key]


def _checkpoint_values(node: Any) -> list[str]:
    """Every ``checkpoint``/``ckpt``/``checkpoint_path`` value set anywhere in a method node, and the learned
    agents' ``judge`` file: a retrained judge changes the edits as new weights do."""
    found: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("checkpoint", "ckpt", "ckpt_path", "checkpoint_path", "judge") and isinstance(v, str) and v:
                found.append(v)
            else:
                found += _checkpoint_values(v)
    elif isinstance(node, list):
        for v in node:
            found += _checkpoint_values(v)
    return found


def method_class(node: DictConfig) -> Any:
    """The class (or function) a method node builds, without building it."""
    from hydra.utils import get_object

    try:
        return get_object(str(node.get("_target_")))
    except Exception:  # noqa: BLE001 - an unresolvable target fails clearly when the method is built
        return None


def method_checkpoints(node: DictConfig, segmenter: str, dataset: str) -> list[Path]:
    """The checkpoint files a method's rows depend on: those its node names (the editor's ``null`` means
    the shipped ``checkpoints/toporefinenet.ckpt``) and, when it starts from the initial mask, the
    segmenter's shipped checkpoint for ``dataset``, the dataset's full name (with its subset: ``preset_name``)."""
    from neurorefiner.inference.init_masks import NAIVE, shipped_checkpoint
    from neurorefiner.paths import project_root

    plain = OmegaConf.to_container(node, resolve=True)
    files = [Path(v) for v in _checkpoint_values(plain)]
    editor = plain.get("editor") if isinstance(plain, dict) else None
    if isinstance(editor, dict) and not editor.get("checkpoint"):
        files.append(project_root() / "checkpoints" / "toporefinenet.ckpt")
    if getattr(method_class(node), "needs_initial", True) and segmenter != NAIVE:
        files.append(shipped_checkpoint(segmenter, dataset))
    return [f for f in files if f.is_file()]


def row_key(node: DictConfig, segmenter: str, dataset: str) -> str:
    """The key a row is kept under: the method's settings (:func:`method_key`), its code version (the
    class's ``cache_version``) and the sha256 of every checkpoint it or the segmenter loads. Rows made by
    other code or other weights are then never read back as if they were current."""
    blob = json.dumps({"settings": method_key(node),
                       "version": str(getattr(method_class(node), "cache_version", "0")),
                       "checkpoints": sorted(file_digest(p) for p in method_checkpoints(node, segmenter, dataset))},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


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


@dataclass
class Plan:
    """What one run does, settled from the config before any work (the config itself is never changed):
    which methods under which keys, on which cases, scored how, written where."""

    dataset: str
    synthetic: bool
    split: str
    segmenter: str
    methods: list[str]
    nodes: dict[str, DictConfig]
    keys: dict[str, str]
    protocols: list[str]
    cases: list[Case]
    out_dir: Path
    settings: str
    dataset_kwargs: dict[str, Any]
    figures: bool = True
    save_masks: bool = True
    progress: bool = True
    not_run_reason: str | None = None

    @property
    def rows_dir(self) -> Path:
        return self.out_dir / "rows" / self.settings / self.split / segmenter_dirname(self.segmenter)

    @property
    def masks_dir(self) -> Path:
        return self.out_dir / "masks" / self.split / segmenter_dirname(self.segmenter)

    def row_files(self, name: str, case: str) -> dict[str, Path]:
        """Protocol -> the file one finished row is kept in (its existence means: do not recompute)."""
        return {p: self.rows_dir / f"{name}-{self.keys[name]}__{p}__{case}.json" for p in self.protocols}


@dataclass
class Outcome:
    """What the rows need from one (method, case): the mask, how long the method took, what it reported."""

    mask: np.ndarray
    seconds: float
    extra: dict
    init: np.ndarray | None
    image: np.ndarray
    spacing: Any


def check_protocols(cfg: DictConfig) -> list[str]:
    """The configured protocols; an unknown one is a clear error before any work."""
    protocols = list(cfg.get("protocols") or ["full_volume"])
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown:
        raise InputError(f"unknown protocol(s) {unknown}; use {', '.join(PROTOCOLS)}")
    return protocols


def runnable_methods(cfg: DictConfig, methods: list[str]) -> tuple[list[str], str | None]:
    """The methods that can run here, and why the others cannot: a table that needs a model server whose
    server does not answer still runs the rows that need none (the table says why the rest are missing)."""
    table = cfg.get("table")
    if table is None or not table.get("requires_server"):
        return methods, None
    why = server_answers(str(cfg.agent.get("base_url", "")))
    if why is None:
        return methods, None
    why += "; start one (make serve-vlm prints the command) and rerun"
    return [m for m in methods if not needs_server(method_node(cfg, m))], why


def is_synthetic_dataset(cfg: DictConfig, dataset: Any) -> bool:
    """Whether outputs must say SYNTHETIC: the dataset config's ``synthetic`` key (conf/dataset/), else the
    dataset object's own flag; never guessed from the name."""
    flag = cfg.dataset.get("synthetic") if cfg.get("dataset") is not None else None
    return bool(getattr(dataset, "synthetic", False) if flag is None else flag)


def make_plan(cfg: DictConfig, dataset: Any, cases: list[Case], methods: list[str],
              not_run_reason: str | None) -> Plan:
    """Everything the run needs to know, resolved once; unknown method names fail here, before any work."""
    nodes = {m: method_node(cfg, m) for m in methods}
    ds_kwargs = {k: v for k, v in OmegaConf.to_container(cfg.dataset, resolve=True).items()  # type: ignore[union-attr]
                 if k not in ("_target_", "name")}
    segmenter = str(cfg.segmenter)
    segmenter_dirname(segmenter)  # a name leading outside the output folders fails before any work
    return Plan(dataset=dataset.name, synthetic=is_synthetic_dataset(cfg, dataset), split=str(cfg.split),
                segmenter=segmenter, methods=methods, nodes=nodes,
                keys={m: row_key(nodes[m], segmenter, preset_name(dataset.name, getattr(dataset, "subset", None)))
                      for m in methods},
                protocols=check_protocols(cfg), cases=_select_cases(cfg, cases), out_dir=Path(cfg.out_dir),
                settings=settings_key(cfg), dataset_kwargs=ds_kwargs, figures=bool(cfg.get("figures", True)),
                save_masks=bool(cfg.get("save_masks", True)), progress=bool(cfg.get("progress", True)),
                not_run_reason=not_run_reason)


class InitialMasks:
    """The segmenter's initial masks, made on first use (for the plan's cases only) and kept as a source."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.source: MaskSource | None = None

    def __call__(self, case: Case, image: np.ndarray) -> np.ndarray:
        if self.source is None:
            p = self.plan
            self.source = initial_mask(p.dataset, p.segmenter, p.split, p.dataset_kwargs, [c.name for c in p.cases])
        return np.asarray(self.source(case, image), dtype=bool)


def run_method(method: Any, case: Case, initial: InitialMasks) -> Outcome:
    """method -> mask: one method on one case, from the normalised image and (when it needs one) the
    segmenter's initial mask."""
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
                     "settings_key": plan.settings, "commit": commit, **outcome.extra})
    return rows


def save_row(path: Path, row: dict) -> None:
    """Keep a finished row (atomically: an interrupted run never leaves half a row that would be reused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(row))


@dataclass
class Projections:
    """The z-MIPs a figure needs, kept instead of the stacks: (method or "" for the initial mask, case) ->
    mask MIP, and case -> (image MIP, stack shape)."""

    masks: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    images: dict[str, tuple[np.ndarray, tuple[int, ...]]] = field(default_factory=dict)

    def keep(self, name: str, case: Case, outcome: Outcome) -> None:
        self.masks[(name, case.name)] = zmip(outcome.mask)
        self.images.setdefault(case.name, (zmip(outcome.image), tuple(outcome.image.shape)))
        if outcome.init is not None:
            self.masks.setdefault(("", case.name), zmip(outcome.init))


def compute_rows(plan: Plan, tracer: Callable, scorer: Callable) -> tuple[list[dict], Projections, InitialMasks]:
    """The rows of every (method, case, protocol): read back when a row file exists, else computed
    (method -> mask -> trace -> score) and kept; masks saved as TIFF and projections kept for figures."""
    rows: list[dict] = []
    mips = Projections()
    initial = InitialMasks(plan)
    commit = provenance("")["commit"]  # the code a row was made with
    bar = tqdm(total=len(plan.methods) * len(plan.cases), desc=f"{plan.dataset}/{plan.split}/{plan.segmenter}",
               unit="vol", disable=not plan.progress)
    for name in plan.methods:
        method = None
        for case in plan.cases:
            bar.set_postfix_str(f"{name} {case.name}")
            files = plan.row_files(name, case.name)
            todo = [p for p in plan.protocols if not files[p].exists()]
            rows.extend(json.loads(files[p].read_text()) for p in plan.protocols if p not in todo)
            if todo:
                if method is None:  # built only when a row is missing (loading an editor costs seconds)
                    traces = trace_dir(plan.out_dir / "traces", plan.split, segmenter_dirname(plan.segmenter),
                                       name, plan.keys[name])
                    method = build_method(plan.nodes[name], traces)
                outcome = run_method(method, case, initial)
                if plan.save_masks:
                    write_volume(plan.masks_dir / f"{name}-{plan.keys[name]}" / f"{case.name}.tif", outcome.mask,
                                 spacing=outcome.spacing)
                if plan.figures:
                    mips.keep(name, case, outcome)
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


def write_run_figures(plan: Plan, rows: list[dict], mips: Projections, initial: InitialMasks) -> dict[str, Path]:
    """One comparison figure per case, read from the rows and the kept projections (or saved masks)."""
    source: MaskSource = (initial.source if initial.source is not None
                          else cached_initial_mask(plan.dataset, plan.segmenter))
    return write_figures(plan.out_dir / "figures" / plan.split / segmenter_dirname(plan.segmenter), plan.cases,
                         plan.methods, {m: plan.masks_dir / f"{m}-{plan.keys[m]}" for m in plan.methods}, rows,
                         mips.masks, mips.images, source, plan.segmenter, plan.dataset)


def send_to_loggers(cfg: DictConfig, plan: Plan, rows: list[dict], summary: list[dict], figures: dict[str, Path],
                    loggers: list[Any] | None) -> None:
    """The rows, the summary and the figures to the experiment loggers (none built when cfg.logger is unset)."""
    if loggers is None:
        from neurorefiner.training.loggers import build_loggers

        loggers = build_loggers(cfg)  # [] when cfg.logger is unset: nothing imported
    if not loggers:
        return
    from neurorefiner.evaluation.run_log import log_evaluation

    log_evaluation(loggers, rows, summary, figures,
                   {"dataset": plan.dataset, "split": plan.split, "segmenter": plan.segmenter,
                    "methods": plan.methods, "protocols": plan.protocols, "settings_key": plan.settings,
                    "method_keys": dict(plan.keys), "commit": provenance("")["commit"],
                    "out_dir": str(plan.out_dir)})


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

        write_paper_table(cfg, table_rows(cfg, plan.out_dir / "rows" / plan.settings / plan.split, rows),
                          dataset, not_run_reason=plan.not_run_reason, synthetic=plan.synthetic)
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


def table_rows(cfg: DictConfig, split_dir: Path, rows: list[dict], dataset: str | None = None) -> list[dict]:
    """This run's rows plus every row already in ``split_dir`` (any segmenter, e.g. from a multirun over
    ``segmenter`` or ``cases``) made with the current settings, code version and checkpoints of a method the
    config knows."""
    dataset = dataset or preset_name(str(cfg.dataset.get("name", "")), cfg.dataset.get("subset"))
    keys: dict[tuple[str, str], str] = {}
    out = {(r["segmenter"], r["method"], r["protocol"], r["case"]): r for r in rows}
    for path in sorted(split_dir.glob("*/*.json")):
        name, segmenter = path.name.split("-", 1)[0], path.parent.name
        if (name, segmenter) not in keys:
            try:
                keys[(name, segmenter)] = row_key(method_node(cfg, name), segmenter, dataset)
            except InputError:
                keys[(name, segmenter)] = ""
        if not path.name.startswith(f"{name}-{keys[(name, segmenter)]}__"):
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
