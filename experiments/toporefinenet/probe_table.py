"""A markdown table of training-probe scores (``python -m neurorefiner.studies.editor_training_probe``), one row
per checkpoint and change threshold, from the ``<name>.json`` files the probe wrote into one folder.

Run: python experiments/toporefinenet/probe_table.py RESULTS_DIR name="what it is" ... [--out summary.md]
(names in the order given; a name without a json is left out and said so)."""

import argparse
import json
from pathlib import Path

TARGETS = ">= 0.60 | >= 0.40 | >= 0.95 | >= 0.90"


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def reconnected(summary: list[dict], kind: str) -> float | None:
    rows = [s for s in summary if s["kind"] == kind and s["variant"] == "correct"]
    return rows[0]["reconnected"] if rows else None


def table(folder: Path, described: dict[str, str]) -> list[str]:
    lines = ["| checkpoint | what | change threshold | raw gap filled, synthetic breaks | raw gap filled, real breaks "
             "| wrong place unchanged | opposite unchanged | synthetic breaks reconnected (raw) |",
             "|---|---|---|---|---|---|---|---|"]
    missing, items = [], None
    for name, what in described.items():
        path = folder / f"{name}.json"
        if not path.exists():
            missing.append(name)
            continue
        d = json.loads(path.read_text())
        items = d["items"]
        by_t = d.get("by_threshold") or {f"{d.get('threshold', 0.5):g}": {"headline": d["headline"],
                                                                         "summary": d["summary"]}}
        for t, v in by_t.items():
            head = " | ".join(fmt(x) for x in v["headline"].values())
            lines.append(f"| {name} | {what} | {t} | {head} | {fmt(reconnected(v['summary'], 'break'))} |")
    lines += [f"| target | | | {TARGETS} | |", "", f"Held-out defects per kind: {items}."]
    if missing:
        lines.append(f"Not scored (no json): {', '.join(missing)}.")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path)
    p.add_argument("described", nargs="+", help='name="what it is"')
    p.add_argument("--out", type=Path, default=None, help="default: FOLDER/summary.md")
    args = p.parse_args()
    described = dict(d.split("=", 1) for d in args.described)
    lines = table(args.folder, described)
    out = args.out or args.folder / "summary.md"
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
