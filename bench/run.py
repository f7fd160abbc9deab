"""``make bench``: run every case in bench/cases/*.py (or those matching ``-k``) and print a table;
``--json FILE`` keeps the rows. Not part of ``make test``."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys

from bench import cases as cases_pkg
from bench.core import Case, measure


def discover(keyword: str | None = None) -> list[Case]:
    found: list[Case] = []
    for mod in pkgutil.iter_modules(cases_pkg.__path__):
        module = importlib.import_module(f"bench.cases.{mod.name}")
        for case in getattr(module, "CASES", []):
            if keyword is None or keyword in case.name:
                found.append(case)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", help="only cases whose name contains this")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    rows = []
    for case in discover(args.k):
        print(f"running {case.name} ...", file=sys.stderr, flush=True)
        row = measure(case)
        rows.append(row)
        ref = ""
        if "ratio" in row:
            ref = f"  ratio {row['ratio']:.2f}x vs {row['reference']} ({row['reference_s']:.3f} s)"
        budget = ""
        if "budget_s" in row:
            budget = f"  budget {row['budget_s']} s: {'ok' if row['within_budget'] else 'OVER'}"
        extra = "".join(f"  {k}={v:.3g}" for k, v in row.items()
                        if k not in ("case", "median_s", "repeats", "reference", "reference_s", "ratio",
                                     "budget_s", "within_budget") and isinstance(v, float))
        print(f"{case.name:40s} {row['median_s']:8.3f} s{ref}{budget}{extra}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)
    if not rows:
        print("no benchmark cases found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
