"""The one writer of every table, a paper table (:mod:`neurorefiner.evaluation.paper_tables`), a segmenter table
(:mod:`neurorefiner.evaluation.segmenter_rows`, :mod:`~neurorefiner.evaluation.segmenter_summary`), a per-stack
table from the runner's rows (:mod:`neurorefiner.evaluation.rows_table`) or a study's (:mod:`neurorefiner.studies`):
rows as CSV (:func:`write_rows_csv`), a Markdown file (:func:`write_markdown`), the provenance stamp a table
carries (:func:`provenance`: command, UTC date, commit), and the paper-style summaries (mean per method, metrics
in the paper's order), and the paired difference of two methods over the same volumes with its bootstrap interval
(:func:`paired_difference`). No other module of the package writes CSV (tests/unit/test_layering.py holds it), so
every table's file is made one way: atomically, with the same dialect and the same column rule."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurorefiner.io.atomic import write_text_atomic

PAPER_METRICS = ("SD", "SSD", "PRE", "REC", "F1", "MES")
LOWER_IS_BETTER = {"SD", "SSD", "pSSD"}
PAIRED_BOOT = 10_000  # bootstrap resamples of the volumes behind every paired interval
PAIRED_SEED = 0       # numpy seed of those resamples: a table re-made from the same rows prints the same interval
PAIRED_TIE = 5e-5     # |difference| below it is a tie: 0.005 points of a 0-1 score (prints as 0.00 in %)


def row_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of the rows, in first-seen order (rows of different methods carry different extras)."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return keys


def write_rows_csv(path: str | Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None, *,
                   ignore_extra: bool = False) -> Path:
    """Rows as one CSV file (atomic: a reader never sees half a table), a header line then one line per row.

    ``columns``: the header, in order (default: every key of the rows, first-seen order,
    :func:`row_columns`); a row without a column leaves its cell empty. A row key outside ``columns`` is an
    error (a figure silently dropped) unless ``ignore_extra``. Values are written as ``str`` gives them: format
    them first where a table wants fewer digits."""
    keys = row_columns(rows) if columns is None else list(columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore" if ignore_extra else "raise")
    writer.writeheader()
    writer.writerows(rows)
    return write_text_atomic(path, buf.getvalue())


def write_markdown(path: str | Path, text: str) -> Path:
    """A table's Markdown file (atomic); ``text`` as given (end it with a newline)."""
    return write_text_atomic(path, text)


def utc_now() -> str:
    """The date and time a table is made, as every table states it: ``YYYY-MM-DD HH:MM UTC``."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def provenance(command: str, ignore: str | Path | None = None) -> dict[str, str]:
    """A table's stamp: the ``command`` that makes it, the UTC date (:func:`utc_now`) and the short commit
    (``+dirty`` when tracked files have uncommitted changes, :func:`neurorefiner.paths.git_commit`). Take it
    before the run writes its own tracked outputs, or the commit reads ``+dirty``; ``ignore``: the table's own
    folder, whose earlier version a run rewrites (:func:`neurorefiner.paths.tree_state`)."""
    from neurorefiner.paths import git_commit

    return {"command": command, "date": utc_now(), "commit": git_commit(ignore)}


def label_methods(rows: Sequence[dict], field: str = "method_protocol") -> list[dict]:
    """Set each row's ``field`` to ``method (protocol)``; where one method name comes with more than one
    ``method_key`` (settings) among ``rows``, to ``method[method_key] (protocol)``, so rows of different
    settings never share a label. Returns ``rows`` (changed in place)."""
    keys: dict[str, set[str]] = {}
    for r in rows:
        keys.setdefault(str(r["method"]), set()).add(str(r.get("method_key", "")))
    for r in rows:
        name = str(r["method"])
        if len(keys[name]) > 1:
            name = f"{name}[{r.get('method_key', '')}]"
        r[field] = f"{name} ({r['protocol']})"
    return list(rows)


def summarize(rows: Sequence[dict], group: str = "method", metrics: Sequence[str] = PAPER_METRICS) -> list[dict]:
    """Mean of each metric per ``group`` value, skipping non-finite values (and counting them). Rows of one
    group made with different method settings (``method_key``) are refused, never averaged: label them apart
    first (:func:`label_methods`)."""
    out = []
    for key in dict.fromkeys(r[group] for r in rows):
        sel = [r for r in rows if r[group] == key]
        settings = {str(r["method_key"]) for r in sel if "method_key" in r}
        if len(settings) > 1:
            raise ValueError(f"rows under {group}={key!r} come from different method settings "
                             f"{sorted(settings)}; label them apart (tables.label_methods) before averaging")
        summary: dict = {group: key, "n": len(sel)}
        for m in metrics:
            vals = [float(r[m]) for r in sel if m in r and r[m] is not None and math.isfinite(float(r[m]))]
            summary[m] = sum(vals) / len(vals) if vals else float("nan")
            if len(vals) < len(sel):
                summary[f"{m}_nonfinite"] = len(sel) - len(vals)
        out.append(summary)
    return out


def markdown_table(summary: Sequence[dict], group: str = "method", metrics: Sequence[str] = PAPER_METRICS,
                   percent: Sequence[str] = ("PRE", "REC", "F1", "MES")) -> str:
    """Markdown with precision/recall/F1/MES in % (as the paper prints them), distances in voxels."""
    head = f"| {group} | n | " + " | ".join(f"{m}{'↓' if m in LOWER_IS_BETTER else '↑'}" for m in metrics) + " |"
    lines = [head, "|" + "---|" * (len(metrics) + 2)]
    for s in summary:
        cells = []
        for m in metrics:
            v = s.get(m, float("nan"))
            cells.append(f"{100 * v:.2f}" if m in percent else f"{v:.2f}")
        lines.append(f"| {s[group]} | {s['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PairedDiff:
    """Method A minus method B over the volumes both were scored on: the mean difference, its bootstrap interval
    [``lo``, ``hi``], and how many volumes A does better / worse / the same (within the tie tolerance) on, of
    ``n``. In the values' units (F1 as the rows hold it, 0-1)."""

    mean: float
    lo: float
    hi: float
    better: int
    worse: int
    ties: int
    n: int


def paired_difference(a: Mapping[str, float], b: Mapping[str, float], n_boot: int = PAIRED_BOOT,
                      seed: int = PAIRED_SEED, *, tie: float = PAIRED_TIE, level: float = 0.95,
                      lower_is_better: bool = False, names: tuple[str, str] = ("a", "b")) -> PairedDiff:
    """``a`` minus ``b``, volume by volume, each a mapping case name -> value (one method's per-volume score).

    The volumes are matched by case name; a case on one side only, or a non-finite value, is a ``ValueError``
    naming it (and ``names``, the two sides as the message calls them): a paired difference over volumes that
    do not pair means nothing. ``mean`` is the mean of the per-volume differences; [``lo``, ``hi``] the
    percentile bootstrap interval of that mean at ``level`` (0.95: the 2.5th and 97.5th percentiles of the means
    of ``n_boot`` resamples of the volumes with replacement, numpy's ``default_rng(seed)``, cases in name
    order, so the same values always give the same interval). With few volumes the interval is crude (three
    volumes have ten distinct resample means) and never wider than the spread of the differences. A volume is
    better where the difference exceeds ``tie`` in the metric's direction (``lower_is_better`` for a distance),
    worse where it falls short by more than ``tie``, a tie otherwise."""
    import numpy as np

    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    if only_a or only_b:
        side = "; ".join(f"{', '.join(cases)} only in {name}" for cases, name in ((only_a, names[0]),
                                                                               (only_b, names[1])) if cases)
        raise ValueError(f"{names[0]} and {names[1]} are not scored on the same volumes: {side}")
    cases = sorted(a)
    if not cases:
        raise ValueError(f"{names[0]} and {names[1]}: no volumes to pair")
    bad = [c for c in cases if not (math.isfinite(float(a[c])) and math.isfinite(float(b[c])))]
    if bad:
        raise ValueError(f"{names[0]} - {names[1]}: no finite value on {', '.join(bad)}")
    d = np.array([float(a[c]) - float(b[c]) for c in cases])
    sign = -1.0 if lower_is_better else 1.0
    better, worse = int(np.sum(sign * d > tie)), int(np.sum(sign * d < -tie))
    means = d[np.random.default_rng(seed).integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return PairedDiff(float(d.mean()), float(lo), float(hi), better, worse, len(d) - better - worse, len(d))
