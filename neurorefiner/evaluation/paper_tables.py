"""The paper's tables from the runner's per-volume rows: Markdown and CSV, best bold, second underlined.

An experiment config (``conf/experiment/table_*.yaml``, ``figure_*.yaml``) names its table in ``cfg.table``::

    table:
      name: table_diadem                 # files: <out>/<name>.md, .csv (and .png for a curve)
      title: ...
      out: ${paths.root_dir}/experiments/table_diadem
      protocol: root_seeded              # the rows' protocol the table shows
      metrics: [SD, SSD, PRE, REC, F1, MES]
      per_case: [F1]                     # also one column per volume for these metrics
      columns: []                        # leading columns (e.g. the agents' check marks of Table 3)
      rows:                              # one per line of the table, in order
        - {label: 3D U-Net (initial), method: initial, segmenter: unet3d, marks: {...}, x: 0}
      curve: null                        # {x: T_max, y: F1}: a PNG of y against each row's x (Figure 5)
      paired: null                       # the paired-difference columns (below): null = where the rows
                                         # include a classical row, true / false = always / never
      paired_metric: F1

A table whose rows include a ``classical`` row (Tables 1-2, the DIADEM table, agents_dev) ends each row with
its paired difference to the initial masks and to the classical refiner of the same segmenter
(:func:`paired_columns`, :func:`neurorefiner.evaluation.tables.paired_difference`): the mean per-volume difference
in ``paired_metric``, a 95 % bootstrap interval over the volumes and the count of volumes better / worse, as
``ΔF1 initial`` / ``ΔF1 classical`` columns in the Markdown (``+2.31 [+0.40, +4.10] 9↑/2↓``, points) and
``dF1_initial``, ``dF1_initial_lo``, ``_hi``, ``_better``, ``_worse``, ``_ties`` (0-1, as F1) at the end of the CSV.
The initial row carries none, the classical row its difference to initial only.

Every file says where its numbers come from: the command, the UTC date and the commit, and whether the data
are SYNTHETIC stand-ins or real (the dataset config's ``synthetic`` key, conf/dataset/). A committed table is
computed on a clean tree: from a tree with uncommitted changes the header says so in capitals, and writing
into ``experiments/`` is refused unless ``allow_dirty=true`` (anywhere else is fine): a ``+dirty`` commit
names no code anyone can check out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from neurorefiner import paths as project_paths
from neurorefiner.errors import InputError
from neurorefiner.evaluation import tables
from neurorefiner.evaluation.tables import LOWER_IS_BETTER, PAPER_METRICS, PairedDiff, paired_difference
from neurorefiner.io.atomic import atomic_path
from neurorefiner.paths import conf_dir, project_root

PERCENT = ("PRE", "REC", "F1", "MES")
EDIT_KEYS = ("edits_accepted", "edits_rejected", "edits_escalated")
PAIRED_REFS = ("initial", "classical")  # the rows every refinement row is compared with, in this order
PAIRED_PARTS = ("", "_lo", "_hi", "_better", "_worse", "_ties")  # a paired column's CSV columns, by suffix


def is_synthetic(dataset_name: str) -> bool:
    """Whether a dataset is a SYNTHETIC stand-in, as its config says (``conf/dataset/<name>.yaml``,
    ``synthetic: true``); a name without a config is taken as real."""
    path = conf_dir() / "dataset" / f"{dataset_name}.yaml"
    if not path.exists():
        return False
    return bool(OmegaConf.load(path).get("synthetic", False))


def provenance(command: str | None = None, ignore: str | Path | None = None) -> dict:
    """The command, the UTC date and the commit (``+dirty`` when the tree has changes outside ``ignore``, the
    table's own folder) of a table."""
    extra = [a for a in sys.argv[1:] if not a.startswith("experiment=")]
    if command is None:
        command = "python evaluate.py " + " ".join(sys.argv[1:])
    elif extra and sys.argv[0].endswith("evaluate.py"):
        command = f"{command} {' '.join(extra)}"  # the overrides this run was given
    return tables.provenance(command, ignore)


def _finite(values: Sequence[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            out.append(f)
    return out


def _matches(row: dict, spec: dict, protocol: str | None) -> bool:
    if protocol and row.get("protocol") != protocol:
        return False
    for key, value in spec.get("match", {}).items():
        if str(row.get(key)) != str(value):
            return False
    if row.get("method") != spec["method"]:
        return False
    return not (spec.get("segmenter") and row.get("segmenter") != spec["segmenter"])


def collect(rows: Sequence[dict], specs: Sequence[dict], protocol: str | None, metrics: Sequence[str],
            per_case: Sequence[str] = ()) -> list[dict]:
    """One summary per row spec: mean of each metric over its volumes, per-volume values of ``per_case``,
    and the shares of accepted / rejected / escalated edits where the rows carry them."""
    out = []
    for spec in specs:
        sel = [r for r in rows if _matches(r, spec, protocol)]
        s: dict = {"label": spec.get("label", spec["method"]), "method": spec["method"], "n": len(sel),
                   "marks": dict(spec.get("marks") or {}), "x": spec.get("x"),
                   "runs": sorted({(str(r.get("split", "")), str(r.get("segmenter", "")), str(r.get("method_key", "")),
                                    str(r["case"])) for r in sel}), "volume_rows": sel}
        for m in metrics:
            vals = _finite([r.get(m) for r in sel])
            s[m] = sum(vals) / len(vals) if vals else float("nan")
        for m in per_case:
            for r in sorted(sel, key=lambda r: str(r["case"])):
                s[f"{m}[{r['case']}]"] = r.get(m)
        secs = _finite([r.get("seconds_method") for r in sel])
        s["seconds_per_volume"] = sum(secs) / len(secs) if secs else float("nan")
        counts = {k: sum(_finite([r.get(k) for r in sel])) for k in EDIT_KEYS}
        if any(k in r for r in sel for k in EDIT_KEYS):
            s.update(counts)
            acc, rej, esc = (counts[k] for k in EDIT_KEYS)
            s["share_accepted"] = _share(acc, acc + rej)     # of the validator's verdicts
            s["share_rejected"] = _share(rej, acc + rej)
            s["share_escalated"] = _share(esc, acc + esc)    # of the defects worked on
        out.append(s)
    return out


def ranks(summaries: Sequence[dict], column: str) -> dict[int, int]:
    """Row index -> 1 (best) or 2 (second best) for one column, by the metric's direction."""
    base = column.split("[")[0]
    vals = [(i, float(s[column])) for i, s in enumerate(summaries)
            if s.get("n") and s.get(column) is not None and math.isfinite(float(s[column]))]
    if len(vals) < 2:
        return {}
    distinct = sorted({v for _, v in vals}, reverse=base not in LOWER_IS_BETTER)
    out = {}
    for i, v in vals:
        if v == distinct[0]:
            out[i] = 1
        elif len(distinct) > 1 and v == distinct[1]:
            out[i] = 2
    return out


def format_cell(column: str, value: Any) -> str:
    """One figure as every paper table prints it: PRE/REC/F1/MES (and their per-volume columns) in % with two
    decimals, the rest with two decimals, a missing or non-finite value as an en dash. Public so the docs'
    figure blocks (:mod:`neurorefiner.evaluation.doc_tables`) print a figure exactly as its table file does."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    return f"{100 * v:.2f}" if column.split("[")[0] in PERCENT else f"{v:.2f}"


def markdown(summaries: Sequence[dict], metrics: Sequence[str], columns: Sequence[str] = (),
             extra: Sequence[str] = (), paired: Sequence[str] = ()) -> str:
    """The table: leading ``columns`` (check marks), label, n, metrics, ``extra`` columns and last the
    ``paired`` columns (:func:`paired_columns`' CSV names, e.g. ``dF1_initial``); best bold, second underlined;
    PRE/REC/F1/MES in %, distances in voxels."""
    shown = [*metrics, *extra]
    arrows = {c: ("↓" if c.split("[")[0] in LOWER_IS_BETTER else "↑") for c in shown}
    head = [*columns, "Method", "n", *(f"{c}{arrows[c]}" for c in shown), *map(paired_header, paired)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    marks = {c: ranks(summaries, c) for c in shown}
    for i, s in enumerate(summaries):
        cells = [str(s["marks"].get(c, "")) for c in columns] + [s["label"], str(s["n"])]
        for c in shown:
            text = format_cell(c, s.get(c))
            r = marks[c].get(i)
            cells.append(f"**{text}**" if r == 1 else f"<u>{text}</u>" if r == 2 else text)
        cells += [paired_cell(s, c) for c in paired]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def paired_name(metric: str, ref: str) -> str:
    """The CSV column of a row's paired difference in ``metric`` to the ``ref`` row: ``dF1_initial``."""
    return f"d{metric}_{ref}"


def paired_header(column: str) -> str:
    """A paired column's Markdown header: ``dF1_initial`` -> ``ΔF1 initial``."""
    metric, _, ref = column[1:].partition("_")
    return f"Δ{metric} {ref}"


def is_paired(column: str, line: dict) -> bool:
    """Whether ``column`` of ``line`` (a summary or a CSV line) is a paired difference with its parts."""
    return column.startswith("d") and "_" in column and all(f"{column}{p}" in line for p in PAIRED_PARTS)


def format_paired(column: str, mean: Any, lo: Any, hi: Any, better: Any, worse: Any) -> str:
    """One paired difference as the tables print it: ``+2.31 [+0.40, +4.10] 9↑/2↓`` (in % points for
    PRE/REC/F1/MES, as :func:`format_cell`); an en dash without one (a row or its reference without volumes,
    volumes that do not pair)."""
    try:
        values = [float(v) for v in (mean, lo, hi)]
        counts = [int(float(v)) for v in (better, worse)]
    except (TypeError, ValueError):
        return "–"
    if not all(math.isfinite(v) for v in values):
        return "–"
    scale = 100.0 if column[1:].partition("_")[0] in PERCENT else 1.0
    m, a, b = (f"{scale * v:+.2f}".replace("-0.00", "+0.00") for v in values)
    return f"{m} [{a}, {b}] {counts[0]}↑/{counts[1]}↓"


def paired_cell(line: dict, column: str) -> str:
    """The Markdown cell of a paired ``column`` in a summary or CSV line: empty where the row has no such
    comparison (the initial row, the classical row to itself, no reference row), else :func:`format_paired`
    (an en dash where the comparison could not be made: its figures are NaN)."""
    if line.get(column) is None or line.get(column) == "":
        return ""
    return format_paired(column, *(line.get(f"{column}{p}") for p in PAIRED_PARTS[:5]))


def paired_refs(spec: dict) -> list[str]:
    """The reference methods a table compares its rows with: ``spec['paired']`` true -> those of
    :data:`PAIRED_REFS` among its rows; false -> none; unset -> the same where the rows include a classical row."""
    methods = {str(r["method"]) for r in spec["rows"]}
    on = spec.get("paired")
    if on is None:
        on = "classical" in methods
    return [ref for ref in PAIRED_REFS if ref in methods] if on else []


def _per_volume(summary: dict, metric: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in summary.get("volume_rows", []):
        case = str(r["case"])
        if case in out:
            raise ValueError(f"{summary['label']}: volume {case} twice (rows of several settings or segmenters; "
                             "give the row spec a segmenter)")
        value = r.get(metric)
        out[case] = float(value) if value is not None and value != "" else math.nan
    return out


def paired_columns(summaries: Sequence[dict], specs: Sequence[dict], refs: Sequence[str],
                   metric: str = "F1") -> tuple[list[str], list[str]]:
    """Each row's paired difference in ``metric`` to the row of each method of ``refs`` with the same segmenter
    (:func:`neurorefiner.evaluation.tables.paired_difference` over the volumes, matched by case name), set in
    the summaries as :func:`paired_name` plus :data:`PAIRED_PARTS`. A row is compared with the references before
    its own method in ``refs`` (initial: none; classical: initial; every other method: both). Returns the
    columns (one per reference) and one note per comparison that could not be made because its volumes do not
    pair (its figures are NaN and print as an en dash; so do those of a row or reference without volumes, with
    no note). A row with no comparison (or no reference row of its segmenter) gets no figures: empty cells."""
    columns = [paired_name(metric, ref) for ref in refs]
    notes: list[str] = []
    for s, sp in zip(summaries, specs):
        method = str(sp["method"])
        mine = refs[:refs.index(method)] if method in refs else list(refs)
        for ref in mine:
            base = next((b for b, bsp in zip(summaries, specs)
                         if bsp["method"] == ref and bsp.get("segmenter") == sp.get("segmenter")), None)
            if base is None:
                continue
            column = paired_name(metric, ref)
            s.update({f"{column}{part}": math.nan for part in PAIRED_PARTS})  # until computed: an en dash
            if not (s["n"] and base["n"]):
                continue
            try:
                p = paired_difference(_per_volume(s, metric), _per_volume(base, metric),
                                      lower_is_better=metric in LOWER_IS_BETTER, names=(s["label"], base["label"]))
            except ValueError as err:
                notes.append(f"{paired_header(column)} of {s['label']}: {err}")
                continue
            s.update(_paired_fields(column, p))
    return columns, notes


def _paired_fields(column: str, p: PairedDiff) -> dict[str, float | int]:
    values = (p.mean, p.lo, p.hi, p.better, p.worse, p.ties)
    return {f"{column}{part}": v for part, v in zip(PAIRED_PARTS, values)}


def paired_legend(metric: str, refs: Sequence[str]) -> str:
    """The sentence under a table with paired columns: what the figures in them are."""
    percent = metric in PERCENT
    unit = "points" if percent else "the metric's units"
    tie = f"{100 * tables.PAIRED_TIE if percent else tables.PAIRED_TIE:g}{' points' if percent else ''}"
    return (f"{' / '.join(paired_header(paired_name(metric, r)) for r in refs)}: the row's {metric} minus that of "
            f"the {' / '.join(refs)} row of the same segmenter, in {unit}: the mean over the volumes both hold, "
            f"its 95 % bootstrap interval over volumes [{tables.PAIRED_BOOT:,} resamples, seed "
            f"{tables.PAIRED_SEED}] and the volumes better ↑ / worse ↓ (a difference under {tie} is a tie).\n")


def beside_paper(summaries: Sequence[dict], specs: Sequence[dict], metrics: Sequence[str], paper_name: str) -> str:
    """Each row beside the paper's row on the benchmark the data stand in for, metric by metric, and the gain of
    every refinement row over the initial masks it starts from (the row with method ``initial`` and the same
    segmenter), ours beside the paper's. Rows whose spec carries no ``paper`` values are left out; empty when
    none does. The paper's figures are on real data: only the shape of the comparison carries over."""
    pairs = [(s, sp) for s, sp in zip(summaries, specs) if sp.get("paper")]
    if not pairs:
        return ""
    initial = {sp.get("segmenter"): (s, sp) for s, sp in zip(summaries, specs) if sp["method"] == "initial"}
    head = ["Method", "n", *(f"{m} {who}" for m in metrics for who in ("ours", "paper")),
            "F1 gain ours", "F1 gain paper"]
    lines = [f"Beside the paper ({paper_name}; the paper's figures are on the real benchmark, ours on the SYNTHETIC "
             "stand-in): each metric ours | paper; F1 gain = the row's F1 minus its initial masks' F1, in points.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s, sp in pairs:
        cells = [s["label"], str(s["n"])]
        for m in metrics:
            cells += [format_cell(m, s.get(m)), f"{float(sp['paper'][m]):.2f}" if m in sp["paper"] else "–"]
        base = initial.get(sp.get("segmenter"))
        if sp["method"] != "initial" and base is not None:
            ours = 100 * (float(s.get("F1", math.nan)) - float(base[0].get("F1", math.nan)))
            theirs = float(sp["paper"].get("F1", math.nan)) - float((base[1].get("paper") or {}).get("F1", math.nan))
            cells += [f"{v:+.2f}" if math.isfinite(v) else "–" for v in (ours, theirs)]
        else:
            cells += ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def edit_shares(summaries: Sequence[dict], trace_root: Path | None = None) -> str:
    """The agents' edits of each row that ran the loop: validator verdicts (accepted / rejected tries) and
    defects (fixed / escalated to a person); ``edits_accepted`` counts both an accepted try and a fixed defect.
    With ``trace_root``, also how many editor calls changed any voxel (read from the traces)."""
    lines = []
    for s in summaries:
        if "edits_accepted" not in s:
            continue
        acc, rej, esc = (int(s[k]) for k in EDIT_KEYS)
        lines.append(f"- {s['label']}: edits tried {acc + rej}: accepted {acc} ({_pct(_share(acc, acc + rej))}), "
                     f"rejected {rej} ({_pct(_share(rej, acc + rej))}); defects worked on {acc + esc}: fixed {acc}, "
                     f"escalated {esc} ({_pct(_share(esc, acc + esc))})")
        ch = editor_changes(trace_root, s) if trace_root is not None else None
        if ch is not None:
            lines[-1] += f"; editor calls that changed any voxel: {ch[1]} of {ch[0]} (from the traces)"
    return "\n".join(lines)


def trace_dir(trace_root: Path, split: str, segmenter: str, method: str, method_key: str) -> Path:
    """Where the runner keeps one method's agent traces (one JSONL per volume): per split and segmenter, since
    a method with one key runs on the masks of several segmenters (and the volumes' names repeat)."""
    return Path(trace_root) / str(split) / str(segmenter) / f"{method}-{method_key}"


def editor_changes(trace_root: Path, summary: dict) -> tuple[int, int] | None:
    """(editor calls, calls that changed any voxel) in the traces of a summary's volumes, or None without
    traces (:func:`trace_dir` of each volume's run, as the runner writes them)."""
    import json

    calls = changed = 0
    found = False
    for split, segmenter, key, case in summary.get("runs", []):
        path = trace_dir(trace_root, split, segmenter, summary["method"], key) / f"{case}.jsonl"
        if not path.exists():
            continue
        found = True
        with open(path) as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if rec.get("role") == "editor" and isinstance(rec.get("decision"), dict):
                    calls += 1
                    changed += (rec["decision"].get("added", 0) + rec["decision"].get("removed", 0)) > 0
    return (calls, changed) if found else None


def _share(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _pct(v: float) -> str:
    return "–" if not math.isfinite(v) else f"{100 * v:.1f} %"


def write_csv(path: Path, summaries: Sequence[dict], columns: Sequence[str], keys: Sequence[str]) -> Path:
    """The table's CSV: its leading columns (check marks), method, label, n, then ``keys``."""
    rows = [{**{c: s["marks"].get(c, "") for c in columns}, "method": s["method"], "label": s["label"], "n": s["n"],
             **{k: s.get(k, "") for k in keys}} for s in summaries]
    return tables.write_rows_csv(path, rows, [*columns, "method", "label", "n", *keys])


def plot_curve(path: Path, summaries: Sequence[dict], y: str, x_label: str, title: str) -> Path:
    """``y`` (mean over volumes) against each row's ``x``: the paper's Figure 5 style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = sorted((float(s["x"]), float(s[y])) for s in summaries
                 if s.get("x") is not None and s.get("n") and math.isfinite(float(s[y])))
    fig, ax = plt.subplots(figsize=(4.5, 3.2), dpi=120)
    scale = 100.0 if y in PERCENT else 1.0
    ax.plot([p[0] for p in pts], [scale * p[1] for p in pts], marker="o")
    ax.set_xlabel(x_label)
    ax.set_ylabel(f"{y}{' (%)' if y in PERCENT else ''}")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def _spec(cfg: DictConfig) -> dict:
    t = cfg.table
    return OmegaConf.to_container(t, resolve=True) if isinstance(t, DictConfig) else dict(t)  # type: ignore[return-value]


DIRTY_WARNING = ("**WARNING: COMPUTED ON A TREE WITH UNCOMMITTED CHANGES (`{commit}`): no commit holds the code "
                 "that made these numbers; not for committing.**\n")


def table_folder(cfg: DictConfig) -> Path:
    """Where ``cfg.table`` is written (its ``out``, else the run's ``out_dir``)."""
    return Path(_spec(cfg).get("out") or Path(cfg.out_dir))


def check_table_destination(cfg: DictConfig) -> None:
    """Refuse to write a table into ``experiments/`` from a dirty tree unless ``allow_dirty=true``: committed
    tables must name a commit that holds their code. Called before the run too, so the refusal costs nothing."""
    out = table_folder(cfg).resolve()
    experiments = (project_root() / "experiments").resolve()
    if experiments != out and experiments not in out.parents:
        return
    commit, dirty = project_paths.tree_state(ignore=out)   # its own earlier version is what it rewrites
    if dirty and not bool(cfg.get("allow_dirty", False)):
        raise InputError(f"the tree has uncommitted changes (at {commit}): a table in experiments/ must be "
                         "computed on a clean tree; commit first, write elsewhere (table.out=...), or pass "
                         "allow_dirty=true", out)


def _header(spec: dict, dataset_name: str, split: str, prov: dict, synthetic: bool | None = None) -> str:
    synthetic = is_synthetic(dataset_name) if synthetic is None else synthetic
    kind = "SYNTHETIC data (stand-ins, not the published benchmark)" if synthetic else "real data"
    warning = DIRTY_WARNING.format(commit=prov["commit"]) + "\n" if prov["commit"].endswith("+dirty") else ""
    return (f"# {spec.get('title', spec['name'])}\n\n{warning}"
            f"Dataset `{dataset_name}` ({kind}), split `{split}`, protocol `{spec.get('protocol') or 'all'}`.\n"
            f"Produced by `{prov['command']}` on {prov['date']} at commit `{prov['commit']}`.\n"
            "Best **bold**, second <u>underlined</u>; PRE/REC/F1/MES in %, SD/SSD in voxels.\n\n")


def write_paper_table(cfg: DictConfig, rows: Sequence[dict], dataset: Any, not_run_reason: str | None = None,
                      synthetic: bool | None = None) -> dict[str, Path]:
    """Write the table ``cfg.table`` describes from ``rows``; returns the paths written. ``not_run_reason``:
    why rows without results did not run (e.g. no model server); ``synthetic``: the dataset config's flag
    (None: read from conf/dataset/<name>.yaml)."""
    check_table_destination(cfg)
    spec = _spec(cfg)
    if not_run_reason:
        spec["not_run_reason"] = not_run_reason
    name = spec["name"]
    out = Path(spec.get("out") or Path(cfg.out_dir))
    out.mkdir(parents=True, exist_ok=True)
    metrics = list(spec.get("metrics") or PAPER_METRICS)
    per_case = list(spec.get("per_case") or [])
    columns = list(spec.get("columns") or [])
    summaries = collect(rows, spec["rows"], spec.get("protocol"), metrics, per_case)
    extra = sorted({k for s in summaries for k in s if "[" in k})
    prov = provenance(spec.get("command"), ignore=out)
    dataset_name = getattr(dataset, "name", str(dataset))
    synthetic = getattr(dataset, "synthetic", None) if synthetic is None else synthetic
    paired_metric = str(spec.get("paired_metric") or "F1")
    refs = paired_refs(spec)
    paired, paired_notes = paired_columns(summaries, spec["rows"], refs, paired_metric)
    text = (_header(spec, dataset_name, str(cfg.split), prov, synthetic)
            + markdown(summaries, metrics, columns, extra, paired))
    if paired:
        text += "\n" + paired_legend(paired_metric, refs)
    if paired_notes:
        text += "\nPaired differences not computed (–):\n\n" + "".join(f"- {note}\n" for note in paired_notes)
    paper = beside_paper(summaries, spec["rows"], metrics, str(spec.get("paper_name", "the paper")))
    if paper:
        text += "\n" + paper
    shares = edit_shares(summaries, Path(cfg.out_dir) / "traces")
    if shares:
        text += "\nEdits in the agents' traces (per volume, summed):\n\n" + shares + "\n"
    made = sorted({str(r.get("commit", "unrecorded")) for r in rows
                   if any(_matches(r, sp, spec.get("protocol")) for sp in spec["rows"])})
    if made:
        text += f"\nRows computed at commit(s): {', '.join(made)} (rows are reused until their settings change).\n"
    missing = [s["label"] for s in summaries if not s["n"]]
    if missing:
        why = spec.get("not_run_reason")
        text += f"\nRows without results (not run{': ' + str(why) if why else ''}): {', '.join(missing)}.\n"
    if spec.get("notes"):
        text += "\n" + str(spec["notes"]).strip() + "\n"
    paths = {"md": out / f"{name}.md"}
    tables.write_markdown(paths["md"], text)
    keys = [*metrics, *extra, "seconds_per_volume", *EDIT_KEYS, "share_accepted", "share_rejected",
            "share_escalated", *(f"{c}{part}" for c in paired for part in PAIRED_PARTS)]
    paths["csv"] = write_csv(out / f"{name}.csv", summaries, columns, keys)
    curve = spec.get("curve")
    if curve:
        paths["png"] = plot_curve(out / f"{name}.png", summaries, curve.get("y", "F1"), curve.get("x_label", "x"),
                                  spec.get("title", name))
    print(text)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return paths


def write_not_run(cfg: DictConfig, dataset_name: str, reason: str, synthetic: bool | None = None) -> Path:
    """A table whose rows could not run here: every row listed with the reason, no numbers."""
    check_table_destination(cfg)
    spec = _spec(cfg)
    out = Path(spec.get("out") or Path(cfg.out_dir))
    out.mkdir(parents=True, exist_ok=True)
    prov = provenance(spec.get("command"), ignore=out)
    lines = [_header(spec, dataset_name, str(cfg.split), prov, synthetic).rstrip("\n").rsplit("\n", 1)[0] + "\n",
             "| Method | status |", "|---|---|"]
    lines += [f"| {r.get('label', r['method'])} | not run: {reason} |" for r in spec["rows"]]
    if spec.get("notes"):
        lines += ["", str(spec["notes"]).strip()]
    path = out / f"{spec['name']}.md"
    tables.write_markdown(path, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return path
