"""A per-stack F1 table read from the rows ``evaluate.py`` keeps (``OUT/rows/<settings>/<split>/<segmenter>/
<method>-<key>__<protocol>__<case>.json``), for scripts that run ``evaluate.py`` once per segmenter into one
``OUT`` (``per_volume.csv`` holds only the last call's rows), so their committed table comes from a command.

``neurorefiner make rows-table OUT --method initial --method "nr_x=label, with commas" --title T --command C
--target FILE.md``
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import summarize, write_markdown

SEGMENTER_NAMES = {"unet3d": "3D U-Net", "nnunet_style": "nnU-Net-style"}
POOLED = ("PRE", "REC", "F1", "SSD")


def read_rows(out: Path, split: str, methods: Sequence[str] | None = None,
              protocol: str = "root_seeded") -> list[dict]:
    """Every kept row of ``split``, ``protocol`` and (when given) ``methods`` under ``out/rows``. Raises
    ``FileNotFoundError`` naming the folder when there is none (the table would otherwise be written empty)."""
    rows = [json.loads(f.read_text()) for f in sorted((out / "rows").glob(f"*/{split}/*/*.json"))]
    rows = [r for r in rows if r.get("protocol") == protocol and (methods is None or r.get("method") in methods)]
    if not rows:
        raise FileNotFoundError(f"{out / 'rows'}: no {split} rows of protocol {protocol}"
                                + (f" for methods {', '.join(methods)}" if methods else ""))
    check_one_setting(out, split, rows)
    return rows


def check_one_setting(out: Path, split: str, rows: Sequence[dict]) -> None:
    """Each (segmenter, method) must come from one method key. Why: a script re-run after a change of code or
    settings leaves the earlier run's rows beside the new ones in the same ``out``; averaging them failed deep in
    the summary with a traceback, and choosing one by date would guess. The error names the keys, their rows and
    commits, and the files to remove."""
    keys: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for r in rows:
        keys.setdefault((str(r["segmenter"]), str(r["method"])), {}).setdefault(str(r.get("method_key")), []).append(r)
    for (seg, method), by_key in keys.items():
        if len(by_key) > 1:
            held = "; ".join(f"key {k}: {len(rs)} row(s) at {stamp(rs)}" for k, rs in sorted(by_key.items()))
            raise InputError(f"the {method} rows on {seg} come from {len(by_key)} method settings ({held}): an "
                             "earlier run under other code or settings left its rows here. Remove the stale ones "
                             f"(rm {out / 'rows'}/*/{split}/{seg}/{method}-<key>__*.json) or give each run its own "
                             "out_dir", out / "rows")


def order(rows: Sequence[dict], field: str, known: Sequence[str]) -> list[str]:
    """The values of ``field`` in ``rows``: those in ``known`` first, in its order, then the rest as met."""
    seen = list(dict.fromkeys(str(r[field]) for r in rows))
    return [k for k in known if k in seen] + [k for k in seen if k not in known]


def stamp(rows: Sequence[dict]) -> str:
    """The commits the rows were made at, as one phrase (one commit is the normal case)."""
    commits = sorted({str(r.get("commit", "unknown")) for r in rows})
    return f"commit `{commits[0]}`" if len(commits) == 1 else "commits " + ", ".join(f"`{c}`" for c in commits)


def score_table(rows: Sequence[dict], names: Mapping[str, str] | None = None) -> str:
    """One line per (segmenter, method): F1 per case, then the pooled means; the best F1 per segmenter bold.
    ``names``: method -> label, and the order of the methods."""
    names = dict(names or {})
    cases = sorted({str(r["case"]) for r in rows})
    head = ("| masks | method | " + " | ".join(f"F1[{c}]" for c in cases) + " | " + " | ".join(POOLED) + " |")
    lines = [head, "|" + "---|" * (2 + len(cases) + len(POOLED))]
    for seg in order(rows, "segmenter", list(SEGMENTER_NAMES)):
        sel = [r for r in rows if r["segmenter"] == seg]
        summaries = {s["method"]: s for s in summarize(sel, group="method", metrics=POOLED)}
        best = max(s["F1"] for s in summaries.values())
        for method in order(sel, "method", list(names)):
            per_case = {str(r["case"]): r["F1"] for r in sel if r["method"] == method}
            s = summaries[method]
            f1 = f"{100 * s['F1']:.2f}"
            cells = [f"{100 * per_case[c]:.2f}" if c in per_case else "-" for c in cases]
            cells += [f"{100 * s['PRE']:.2f}", f"{100 * s['REC']:.2f}",
                      f"**{f1}**" if s["F1"] == best else f1, f"{s['SSD']:.2f}"]
            lines.append(f"| {SEGMENTER_NAMES.get(seg, seg)} | {names.get(method, method)} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def header(title: str, command: str, rows: Sequence[dict]) -> str:
    return (f"# {title}\n\nMade {time.strftime('%Y-%m-%d', time.gmtime())} by `{command}` (rows at {stamp(rows)}). "
            "Root-seeded APP2; F1, PRE, REC in %, SSD in voxels; the pooled columns are means over the stacks.\n\n")


def parse_methods(methods: Sequence[str]) -> dict[str, str]:
    """``name`` or ``name=label`` (commas allowed in the label) -> {name: label}, in the order given."""
    return dict(m.split("=", 1) if "=" in m else (m, m) for m in methods)


def write_rows_table(out: Path, split: str, methods: Sequence[str], title: str, command: str, target: Path) -> str:
    """The per-stack F1 table of ``methods`` (``name`` or ``name=label``, in table order) from the rows under
    ``out``, written to ``target`` with its title and stamp; returns the text. ``FileNotFoundError`` naming the
    folder when it holds no such rows (nothing is written then)."""
    names = parse_methods(methods)
    rows = read_rows(out, split, list(names))
    text = header(title, command, rows) + score_table(rows, names)
    write_markdown(target, text)
    return text
