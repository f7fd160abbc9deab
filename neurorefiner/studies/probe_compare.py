"""Several editor probes (``neurorefiner study probe-editor``, one per checkpoint) side by side in one Markdown
table: the network alone (raw) and with the topology decoding, on the same cut defects. Table 6's variants
score alike in the agent loop, whose accepted edits are the decoding's; the probe is where they differ."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import write_markdown

# (column title, defect kind (None: edit-weighted over the kinds), variant, decoding, field)
COLUMNS: tuple[tuple[str, str | None, str, str, str], ...] = (
    ("raw: break gap filled", "break", "correct", "raw", "gap_filled"),
    ("raw: breaks reconnected", "break", "correct", "raw", "reconnected"),
    ("raw: noise removed", "noise", "correct", "raw", "noise_removed"),
    ("raw: pasted removed", "paste", "correct", "raw", "noise_removed"),
    ("raw: wrong place, no change", None, "wrong_location", "raw", "unchanged"),
    ("raw: opposite op, no change", None, "opposite", "raw", "unchanged"),
    ("decoded: breaks reconnected", "break", "correct", "topology", "reconnected"),
    ("decoded: false merges", "break", "correct", "topology", "false_merge"),
)


def probe_value(rows: Sequence[dict], kind: str | None, variant: str, decoding: str, field: str) -> float | None:
    """One figure of a probe's summary CSV; with ``kind`` None the edit-weighted mean over the kinds."""
    sel = [r for r in rows if r["variant"] == variant and r["decoding"] == decoding and r.get(field, "") != ""
           and (kind is None or r["kind"] == kind)]
    n = sum(int(r["edits"]) for r in sel)
    return None if not n else sum(float(r[field]) * int(r["edits"]) for r in sel) / n


def compare_probes(entries: Sequence[tuple[str, Path]], out: Path, title: str, intro: str = "") -> Path:
    """Write ``out`` (Markdown): one line per (label, probe folder); a folder without
    ``editor_probe.csv`` is listed as not run."""
    if not entries:
        raise InputError("give at least one LABEL=FOLDER probe")
    lines = [f"# {title}", ""] + ([intro, ""] if intro else [])
    lines += ["| probe | " + " | ".join(c[0] for c in COLUMNS) + " | made |", "|" + "---|" * (len(COLUMNS) + 2)]
    for label, folder in entries:
        path = Path(folder) / "editor_probe.csv"
        if not path.exists():
            lines.append(f"| {label} | " + " | ".join("not run" for _ in COLUMNS) + " | – |")
            continue
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        if not rows or not {"kind", "variant", "decoding", "edits"} <= set(rows[0]):
            raise InputError("not an editor probe summary (neurorefiner study probe-editor writes it)", path)
        vals = [probe_value(rows, *c[1:]) for c in COLUMNS]
        made = f"{rows[0].get('date', '?')}, {rows[0].get('commit', '?')}"
        lines.append(f"| {label} | " + " | ".join("–" if v is None else f"{v:.2f}" for v in vals) + f" | {made} |")
    write_markdown(Path(out), "\n".join(lines) + "\n")
    return Path(out)
