"""``make bench``: run every case in bench/cases/*.py (or those whose name contains ``-k``) and print a
table; ``--json FILE`` keeps the rows. ``BENCH_SMOKE=1`` runs each case once at its smallest size (the test
suite does, so a case cannot rot unseen). A failing case is reported and the others still run; the exit
code is 1 if any failed."""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import traceback

import typer

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


def _line(case: Case, row: dict) -> str:
    ref = ""
    if "ratio" in row:
        ref = f"  ratio {row['ratio']:.2f}x vs {row['reference']} ({row['reference_s']:.3f} s)"
    budget = ""
    if "budget_s" in row:
        budget = f"  budget {row['budget_s']} s: {'ok' if row['within_budget'] else 'OVER'}"
    extra = "".join(f"  {k}={v:.3g}" for k, v in row.items()
                    if k not in ("case", "median_s", "repeats", "reference", "reference_s", "ratio",
                                 "budget_s", "within_budget") and isinstance(v, float))
    return f"{case.name:40s} {row['median_s']:8.3f} s{ref}{budget}{extra}"


def main(k: str | None = typer.Option(None, "-k", help="only cases whose name contains this"),
         json_out: str | None = typer.Option(None, "--json", help="write the rows to this file")) -> None:
    """Time every benchmark case (with its reference measured in the same process) and print the table."""
    rows, failed = [], []
    for case in discover(k):
        print(f"running {case.name} ...", file=sys.stderr, flush=True)
        try:
            row = measure(case)
        except Exception:  # noqa: BLE001 - report the case and go on with the others
            traceback.print_exc()
            failed.append(case.name)
            continue
        rows.append(row)
        print(_line(case, row), flush=True)
    if json_out:
        with open(json_out, "w") as fh:
            json.dump(rows, fh, indent=2)
    if failed:
        print(f"FAILED cases: {', '.join(failed)}", file=sys.stderr)
        raise typer.Exit(1)
    if not rows:
        print("no benchmark cases found", file=sys.stderr)
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
