"""Collect the editor probe of each Table 6 variant (probe.sh) into probe_table.md: the network alone (raw)
and with the topology decoding, on the same cut defects, so the variants can be told apart where the agent
loop's traces cannot."""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = [("shipped", "shipped editor (reference, longer chain)"), ("cab", "CAB"), ("adaln", "AdaLN"),
            ("cdp", "CDP"), ("hashing", "CAB + hashing encoder"),
            ("scratch_two_stage", "CAB two-stage from scratch"), ("scratch_one_stage", "CAB one-stage from scratch")]
# (column title, kind, variant, decoding, field)
COLUMNS = [
    ("raw: break gap filled", "break", "correct", "raw", "gap_filled"),
    ("raw: breaks reconnected", "break", "correct", "raw", "reconnected"),
    ("raw: noise removed", "noise", "correct", "raw", "noise_removed"),
    ("raw: pasted removed", "paste", "correct", "raw", "noise_removed"),
    ("raw: wrong place, no change", None, "wrong_location", "raw", "unchanged"),
    ("raw: opposite op, no change", None, "opposite", "raw", "unchanged"),
    ("decoded: breaks reconnected", "break", "correct", "topology", "reconnected"),
    ("decoded: false merges", "break", "correct", "topology", "false_merge"),
]


def _value(rows: list[dict], kind: str | None, variant: str, decoding: str, field: str) -> float | None:
    """One figure; with kind None the edit-weighted mean over the kinds (a wrong place or the opposite op)."""
    sel = [r for r in rows if r["variant"] == variant and r["decoding"] == decoding and r[field] != ""
           and (kind is None or r["kind"] == kind)]
    n = sum(int(r["edits"]) for r in sel)
    return None if not n else sum(float(r[field]) * int(r["edits"]) for r in sel) / n


def main() -> None:
    lines = ["# Table 6 variants as tools: the editor probe (DIADEM dev blocks, real data)", "",
             "Made by `bash experiments/table_6_toporefinenet/probe.sh` (per variant `neurorefiner probe-editor "
             "--n 20 --kinds break,noise,paste --synthetic ''`): 20 breaks, 20 noise blobs and 20 pasted fragments "
             "cut into gold blocks of DIADEM OP_1-OP_6, the same for every variant; each edited with the right "
             "instruction, a wrong place and the opposite operation. Shares of edits; raw = the network's own "
             "output on the block, decoded = with the topology decoding the agents use.", ""]
    head = "| variant | " + " | ".join(c[0] for c in COLUMNS) + " | made |"
    lines += [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for key, label in VARIANTS:
        path = HERE / "probe" / key / "editor_probe.csv"
        if not path.exists():
            lines.append(f"| {label} | " + " | ".join("not run" for _ in COLUMNS) + " | – |")
            continue
        rows = list(csv.DictReader(path.open()))
        vals = [_value(rows, k, v, d, f) for _, k, v, d, f in COLUMNS]
        made = f"{rows[0]['date']}, {rows[0]['commit']}"
        lines.append(f"| {label} | " + " | ".join("–" if x is None else f"{x:.2f}" for x in vals) + f" | {made} |")
    out = HERE / "probe_table.md"
    tmp = out.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
