"""One table for a whole Hydra multirun sweep of ``evaluate.py``
(``python evaluate.py -m method_registry.neurorefiner.t_max=1,2,3,4,5``).

Each job of a sweep runs :func:`neurorefiner.evaluation.runner.evaluate` in its own output dir and writes a
table of its own rows only. To put the sweep in one table, every job leaves a manifest in its Hydra output dir
(``sweep_job.json``, written atomically): its number, its overrides, its status (``running`` when it starts,
``completed`` or ``failed`` when it ends) and the rows it produced, inline, so the merge needs no shared
``out_dir``. The sweep dir holds the plan (``sweep_plan.json``: the command and, for the basic sweeper, every
job's overrides), so a job that never started or never finished is still known.

:func:`merge_sweep` reads them and writes, in the sweep dir (``hydra.sweep.dir``):

- ``sweep_table.md``: mean metrics per (job, method, protocol), each row labelled
  ``method (protocol) · <the job's overrides that differ across the sweep>``, e.g.
  ``neurorefiner (root_seeded) · method_registry.neurorefiner.t_max=3``; a job without results is a row
  ``MISSING (<why>) · <overrides>`` and is listed below the table with its error;
- ``sweep_table.csv``: the same rows with job, overrides, status, method, method_key and protocol columns;
- ``sweep_per_volume.csv``: every job's per-volume rows with the job and its label.

Rows of different jobs are never averaged together, nor rows of one method under different settings
(:func:`neurorefiner.evaluation.tables.label_methods`). The functions here take plain dicts and lists;
:class:`SweepTable` is the Hydra callback (``hydra.callbacks`` in ``conf/evaluate.yaml``) that feeds them:
the manifests at each job's start and end, the merge after every job (so a sweep that stops on a failed job
still leaves the table, the failure listed) and once more, printed, when the sweep ends.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback  # the edge: SweepTable below; the functions take plain values

from neurorefiner.evaluation.tables import (
    PAPER_METRICS,
    label_methods,
    markdown_table,
    summarize,
    write_rows_csv,
)
from neurorefiner.io.atomic import write_text_atomic

MANIFEST = "sweep_job.json"
PLAN = "sweep_plan.json"
TABLE_MD, TABLE_CSV, PER_VOLUME_CSV = "sweep_table.md", "sweep_table.csv", "sweep_per_volume.csv"
GROUP = "method (protocol) · overrides"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def write_job_manifest(job_dir: str | Path, *, num: int, overrides: Sequence[str], status: str,
                       rows: Sequence[Mapping] | None = None, error: str | None = None,
                       out_dir: str | None = None) -> Path:
    """A job's record for the merge (``<job_dir>/sweep_job.json``, atomic): ``status`` is ``running``,
    ``completed`` or ``failed``; ``rows`` the per-volume rows it produced."""
    record = {"num": int(num), "overrides": [str(o) for o in overrides], "status": status,
              "error": error, "out_dir": out_dir, "job_dir": str(job_dir), "time": _now(),
              "rows": [dict(r) for r in rows or []]}
    return write_text_atomic(Path(job_dir) / MANIFEST, json.dumps(record, default=str))


def write_plan(sweep_dir: str | Path, jobs: Sequence[Sequence[str]] | None, command: str) -> Path:
    """The sweep's command and, when known, every job's overrides in job-number order."""
    record = {"command": command, "time": _now(), "jobs": None if jobs is None else [list(j) for j in jobs]}
    return write_text_atomic(Path(sweep_dir) / PLAN, json.dumps(record))


def read_sweep(sweep_dir: str | Path) -> tuple[dict | None, list[dict]]:
    """The plan (or None) and every readable job manifest under ``sweep_dir``."""
    sweep_dir = Path(sweep_dir)
    plan = json.loads((sweep_dir / PLAN).read_text()) if (sweep_dir / PLAN).exists() else None
    manifests = []
    for path in sorted(sweep_dir.rglob(MANIFEST)):
        try:
            manifests.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue  # written atomically, so only a foreign file lands here
    return plan, manifests


def _split(override: str) -> tuple[str, str | None]:
    key, sep, value = str(override).partition("=")
    return key, (value if sep else None)


def differing_keys(jobs: Sequence[Sequence[str]]) -> list[str]:
    """The override keys whose value (or presence) is not the same in every job, in first-seen order."""
    parsed = [dict(_split(o) for o in job) for job in jobs]
    keys = list(dict.fromkeys(k for job in parsed for k in job))
    return [k for k in keys if len({job.get(k, "\0absent") for job in parsed}) > 1]


def job_labels(jobs: Mapping[int, Sequence[str]]) -> dict[int, str]:
    """Job number -> its overrides that differ across the sweep (``a=1, b=x``); a label two jobs share (or an
    empty one in a sweep of several jobs) gets ``job <n>`` so that no two jobs ever read the same."""
    keys = differing_keys(list(jobs.values()))
    labels = {}
    for num, job in jobs.items():
        own = dict(_split(o) for o in job)
        labels[num] = ", ".join(k if own[k] is None else f"{k}={own[k]}" for k in keys if k in own)
    counts: dict[str, int] = {}
    for label in labels.values():
        counts[label] = counts.get(label, 0) + 1
    for num, label in labels.items():
        if counts[label] > 1 or (not label and len(labels) > 1):
            labels[num] = f"{label} (job {num})" if label else f"job {num}"
    return labels


def _missing_reason(manifest: dict | None) -> tuple[str, str]:
    """(status, why) of a job without results."""
    if manifest is None:
        return "not started", "not started (the sweep stopped before it)"
    if manifest.get("status") == "failed":
        return "failed", f"failed: {manifest.get('error') or 'no error recorded'}"
    return str(manifest.get("status")), "started, never finished (still running, killed, or it exited: see its log)"


def merge(manifests: Sequence[dict], planned: Sequence[Sequence[str]] | None = None,
          metrics: Sequence[str] = PAPER_METRICS) -> dict[str, Any]:
    """Merge job manifests into one table's rows.

    ``planned``: every job's overrides in job-number order (the plan); without it the jobs are the
    manifests found. A manifest whose overrides do not match the plan's job of its number (left in the sweep
    dir by an earlier sweep) is ignored. Returns ``summary`` (one entry per job x method x protocol, and one
    per job without results, in job order), ``rows`` (every per-volume row with ``job``, ``overrides`` and
    the label), ``missing`` (job, overrides, status, why) and ``keys`` (the overrides that differ)."""
    found = {int(m["num"]): m for m in manifests if "num" in m}
    if planned is not None:
        jobs = {i: [str(o) for o in job] for i, job in enumerate(planned)}
        found = {n: m for n, m in found.items() if n in jobs and list(m.get("overrides", [])) == jobs[n]}
    else:
        jobs = {n: [str(o) for o in found[n].get("overrides", [])] for n in sorted(found)}
    labels = job_labels(jobs)
    summary: list[dict] = []
    all_rows: list[dict] = []
    missing: list[dict] = []
    for num in sorted(jobs):
        manifest, label = found.get(num), labels[num]
        if manifest is None or manifest.get("status") != "completed":
            status, why = _missing_reason(manifest)
            missing.append({"job": num, "overrides": label, "status": status, "why": why,
                            "job_dir": (manifest or {}).get("job_dir")})
            summary.append({GROUP: f"MISSING ({status}) · {label}", "n": 0, **{m: math.nan for m in metrics},
                            "job": num, "overrides": label, "status": status, "why": why})
            continue
        rows = label_methods([dict(r) for r in manifest.get("rows", [])])
        for row in rows:
            row.update({"job": num, "overrides": label,
                        GROUP: f"{row['method_protocol']} · {label}" if label else row["method_protocol"]})
        firsts = {}
        for row in rows:
            firsts.setdefault(row[GROUP], row)
        for s in summarize(rows, group=GROUP, metrics=metrics):
            first = firsts[s[GROUP]]
            s.update({"job": num, "overrides": label, "status": "completed", "method": first["method"],
                      "method_key": first.get("method_key", ""), "protocol": first["protocol"]})
            summary.append(s)
        if not rows:
            summary.append({GROUP: f"(no rows) · {label}", "n": 0, **{m: math.nan for m in metrics},
                            "job": num, "overrides": label, "status": "completed"})
        all_rows.extend(rows)
    return {"summary": summary, "rows": all_rows, "missing": missing, "keys": differing_keys(list(jobs.values())),
            "jobs": jobs, "labels": labels}


def write_merged(sweep_dir: str | Path, merged: dict[str, Any], command: str = "",
                 metrics: Sequence[str] = PAPER_METRICS) -> dict[str, Path]:
    """``sweep_table.md``, ``sweep_table.csv`` and ``sweep_per_volume.csv`` in ``sweep_dir``."""
    from neurorefiner.evaluation.paper_tables import is_synthetic

    sweep_dir = Path(sweep_dir)
    jobs, missing = merged["jobs"], merged["missing"]
    datasets = sorted({str(r.get("dataset")) for r in merged["rows"] if r.get("dataset") is not None})
    kinds = ", ".join(f"`{d}` ({'SYNTHETIC data' if is_synthetic(d) else 'real data'})" for d in datasets)
    varied = ", ".join(f"`{k}`" for k in merged["keys"]) or "nothing (one job)"
    lines = [f"# Sweep: {len(jobs)} job(s), {len(jobs) - len(missing)} with results, {len(missing)} missing\n",
             f"Command: `{command or 'unrecorded'}`  ",
             f"Sweep dir: `{sweep_dir}`  ",
             f"Rows are labelled by the overrides that differ across the sweep: {varied}.  ",
             f"Dataset(s): {kinds or 'none'}; PRE/REC/F1/MES in %, SD/SSD in voxels.\n",
             markdown_table(merged["summary"], group=GROUP, metrics=metrics).rstrip("\n")]
    if missing:
        lines += ["", "Jobs without results:", ""]
        lines += [f"- job {m['job']} (`{m['overrides'] or 'no overrides'}`): {m['why']}"
                  + (f"; its output dir: `{m['job_dir']}`" if m.get("job_dir") else "") for m in missing]
    paths = {"md": write_text_atomic(sweep_dir / TABLE_MD, "\n".join(lines) + "\n")}
    paths["csv"] = write_rows_csv(sweep_dir / TABLE_CSV, merged["summary"])
    paths["per_volume"] = write_rows_csv(sweep_dir / PER_VOLUME_CSV, merged["rows"])
    return paths


def merge_sweep(sweep_dir: str | Path, metrics: Sequence[str] = PAPER_METRICS) -> tuple[dict[str, Path], str]:
    """Read the plan and the job manifests under ``sweep_dir``, write the merged files there; returns the
    paths and the Markdown."""
    plan, manifests = read_sweep(sweep_dir)
    merged = merge(manifests, (plan or {}).get("jobs"), metrics)
    paths = write_merged(sweep_dir, merged, (plan or {}).get("command", ""), metrics)
    return paths, paths["md"].read_text()


def planned_jobs(sweeper_params: Mapping[str, Any], task_overrides: Sequence[str]) -> list[list[str]] | None:
    """Every job's overrides as Hydra's basic sweeper will launch them (job-number order), or None when they
    cannot be worked out here (another sweeper's syntax, e.g. ranges or intervals)."""
    try:
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
        from hydra.core.override_parser.overrides_parser import OverridesParser

        params = [f"{k}={v}" for k, v in sweeper_params.items()] + [str(o) for o in task_overrides]
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(params), None)
        return [list(job) for batch in batches for job in batch]
    except Exception:  # noqa: BLE001 - the plan is a convenience; the manifests still give the table
        return None


def _is_multirun(config: Any) -> bool:
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    return OmegaConf.select(config, "hydra.mode") == RunMode.MULTIRUN


class SweepTable(Callback):
    """Hydra callback (``conf/evaluate.yaml``, ``hydra.callbacks.sweep_table``): in a multirun, a manifest per
    job and one merged table in the sweep dir. Does nothing in a plain run."""

    def __init__(self, print_table: bool = True) -> None:
        self.print_table = print_table

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from omegaconf import OmegaConf

        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        jobs = None
        if str(OmegaConf.select(config, "hydra.sweeper._target_") or "").endswith("BasicSweeper"):
            params = OmegaConf.select(config, "hydra.sweeper.params")
            params = {} if params is None else OmegaConf.to_container(params, resolve=False)
            jobs = planned_jobs(params, OmegaConf.to_container(config.hydra.overrides.task, resolve=False))
        write_plan(sweep_dir, jobs, "python " + " ".join(sys.argv))

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        if _is_multirun(config):
            self._record(config, "running")

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        if not _is_multirun(config):
            return
        from hydra.core.utils import JobStatus

        if job_return.status == JobStatus.COMPLETED:
            value = job_return.return_value
            rows = [r for r in value if isinstance(r, Mapping)] if isinstance(value, (list, tuple)) else []
            self._record(config, "completed", rows=rows)
        else:
            exc = getattr(job_return, "_return_value", None)
            self._record(config, "failed", error=f"{type(exc).__name__}: {exc}" if exc is not None else None)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        paths, text = merge_sweep(str(config.hydra.sweep.dir))
        if self.print_table:
            print(text)
        print(f"[sweep] merged table of the whole sweep: {paths['md']} ({paths['csv'].name}, "
              f"{paths['per_volume'].name} beside it)")

    def _record(self, config: Any, status: str, rows: Sequence[Mapping] | None = None,
                error: str | None = None) -> None:
        from omegaconf import OmegaConf

        try:
            out_dir = OmegaConf.select(config, "out_dir")
        except Exception:  # noqa: BLE001 - only informative
            out_dir = None
        write_job_manifest(str(config.hydra.runtime.output_dir), num=int(config.hydra.job.num),
                           overrides=OmegaConf.to_container(config.hydra.overrides.task, resolve=False),
                           status=status, rows=rows, error=error, out_dir=None if out_dir is None else str(out_dir))
        # after every job, so a sweep that stops on a failed job (Hydra then skips on_multirun_end) still
        # leaves the merged table with that job listed as missing
        merge_sweep(str(config.hydra.sweep.dir))
