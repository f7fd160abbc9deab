"""Paper-style tables from per-volume metric rows: mean per method, metrics in the paper's order."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neurorefiner.io.atomic import atomic_path

PAPER_METRICS = ("SD", "SSD", "PRE", "REC", "F1", "MES")
LOWER_IS_BETTER = {"SD", "SSD", "pSSD"}


def row_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every key of the rows, in first-seen order (rows of different methods carry different extras)."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return keys


def write_rows_csv(path: Path, rows: Sequence[dict]) -> Path:
    """Per-volume rows, one CSV (atomic)."""
    keys = row_columns(rows)
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    return path


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
