"""Split the instruction-following tables by operation: mean share of the defect fixed per model, condition
and operation (connect / repair = breaks, remove = noise and foreign fragments), from the rows.csv that
evaluate_instructions.py wrote.

    python experiments/toporefinenet/by_operation.py experiments/toporefinenet/results/region_channel_synthetic
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

from neurorefiner.io.atomic import write_text_atomic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", type=Path, nargs="+", help="result folders holding rows.csv")
    args = ap.parse_args(argv)
    for folder in args.folders:
        rows = list(csv.DictReader(open(folder / "rows.csv")))
        fixed: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for r in rows:
            if r["condition"] != "input (no edit)":
                fixed[(r["model"], r["condition"], r["op"])].append(float(r["fixed"]))
        lines = [f"Share of the defect fixed, by operation ({folder.name}/rows.csv); n in brackets.", "",
                 "| model | condition | connect | repair | remove |", "|---|---|---|---|---|"]
        for model, condition in dict.fromkeys((m, c) for m, c, _ in fixed):
            cells = []
            for op in ("connect", "repair", "remove"):
                v = fixed.get((model, condition, op), [])
                cells.append(f"{sum(v) / len(v):.3f} ({len(v)})" if v else "-")
            lines.append(f"| {model} | {condition} | " + " | ".join(cells) + " |")
        write_text_atomic(folder / "by_operation.md", "\n".join(lines) + "\n")
        print("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
