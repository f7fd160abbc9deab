"""Benchmark primitives: a case times a function (median of repeats) and, where it has one, a reference
measured in the same process, so the ratio is meaningful on any machine."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SMOKE = os.environ.get("BENCH_SMOKE") == "1"
"""Smoke mode (``BENCH_SMOKE=1``, what the test suite runs): every case once, at its smallest size, so that a
case cannot rot unseen; its figures mean nothing."""


def sized(full: tuple[int, ...], smoke: tuple[int, ...]) -> tuple[int, ...]:
    """A case's volume shape: ``full`` for figures, ``smoke`` in smoke mode."""
    return smoke if SMOKE else full


@dataclass
class Case:
    name: str
    setup: Callable[[], Any]  # returns the argument passed to run/reference (not timed)
    run: Callable[[Any], Any]
    reference: Callable[[Any], Any] | None = None
    reference_name: str = ""
    repeats: int = 3
    budget_s: float | None = None  # target: the figure should stay under this
    unit: str = "s"
    notes: str = ""
    extra: Callable[[Any, float], dict] | None = field(default=None)  # derived figures (e.g. samples/s)
    warmup: bool = True  # False: no untimed first call (a case whose one call takes minutes, e.g. a whole volume)


def median_time(fn: Callable[[Any], Any], arg: Any, repeats: int, warmup: bool = True) -> float:
    if SMOKE:
        repeats = 1
    elif warmup:
        fn(arg)  # warm-up: JIT compilation, caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(case: Case) -> dict:
    arg = case.setup()
    t = median_time(case.run, arg, case.repeats, case.warmup)
    row: dict = {"case": case.name, "median_s": t, "repeats": case.repeats}
    if case.reference is not None:
        tr = median_time(case.reference, arg, case.repeats, case.warmup)
        row.update(reference=case.reference_name, reference_s=tr, ratio=t / tr if tr > 0 else float("inf"))
    if case.budget_s is not None:
        row.update(budget_s=case.budget_s, within_budget=t <= case.budget_s)
    if case.extra is not None:
        row.update(case.extra(arg, t))
    return row
