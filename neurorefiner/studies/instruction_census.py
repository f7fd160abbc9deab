"""How much information the Advisor's sentences carry in a refine run: per trace, the tries, the defects, the
distinct sentences, and the defects that share a sentence with a defect of another kind or place.

The text path of TopoRefineNet only learns something at use if the sentence changes with the edit; a constant
``Repair break at center-center-center`` tells it nothing. This reads the traces a run left (``refine.py``'s
``trace.jsonl`` or ``evaluate.py``'s ``traces/<split>/<segmenter>/<method>/<case>.jsonl``) and counts, so the
figure in ``experiments/editor/`` comes from a command, not from reading traces by eye.

``neurorefiner study instruction-census TRACE_OR_DIR ... [--out FILE.md]``
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from neurorefiner.agents.trace import read_trace
from neurorefiner.evaluation.tables import write_markdown


@dataclass(frozen=True)
class Census:
    """One trace's sentences. ``shared``: defects whose sentence some other defect (of any kind, another place)
    also received; ``no_sentence``: tries where the Advisor gave up (no frame left)."""

    trace: str
    tries: int
    defects: int
    distinct: int
    shared: int
    no_sentence: int
    most_common: str
    most_common_defects: int


def _defect_key(record: dict) -> tuple:
    return (record.get("round"), record.get("block"), record.get("defect"), record.get("defect_kind"))


def census(records: Iterable[dict], name: str = "") -> Census:
    """Count the Advisor's sentences in one trace's records (``read_trace``)."""
    by_sentence: dict[str, set[tuple]] = defaultdict(set)
    defects: set[tuple] = set()
    tries = no_sentence = 0
    for r in records:
        if r.get("type") != "decision" or r.get("role") != "advisor":
            continue
        tries += 1
        key = _defect_key(r)
        defects.add(key)
        decision = r.get("decision")
        sentence = decision.get("instruction") if isinstance(decision, dict) else None
        if not sentence:
            no_sentence += 1
            continue
        by_sentence[str(sentence)].add(key)
    shared = {k for keys in by_sentence.values() if len(keys) > 1 for k in keys}
    top, top_keys = max(by_sentence.items(), key=lambda kv: (len(kv[1]), kv[0]), default=("", set()))
    return Census(name, tries, len(defects), len(by_sentence), len(shared), no_sentence, top, len(top_keys))


def trace_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``.jsonl`` traces named or found under the folders named; an error naming a path that holds none."""
    out: list[Path] = []
    for p in map(Path, paths):
        found = sorted(p.rglob("*.jsonl")) if p.is_dir() else [p] if p.suffix == ".jsonl" and p.exists() else []
        if not found:
            raise FileNotFoundError(f"{p}: no trace (.jsonl) there")
        out.extend(found)
    return out


def to_markdown(rows: Sequence[Census], root: Path | None = None) -> str:
    head = ("| trace | tries | defects | distinct sentences | defects sharing a sentence | tries without a sentence "
            "| most common sentence (defects) |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for c in rows:
        name = str(Path(c.trace).relative_to(root)) if root and Path(c.trace).is_relative_to(root) else c.trace
        lines.append(f"| {name} | {c.tries} | {c.defects} | {c.distinct} | {c.shared} | {c.no_sentence} "
                     f"| {c.most_common or '-'} ({c.most_common_defects}) |")
    return head + "\n".join(lines) + "\n"


def write_census(traces: Sequence[str | Path], out: str | Path | None = None, root: str | Path | None = None) -> str:
    """The census table of the traces named (files, or folders holding them): one line per trace that has
    Advisor tries, trace names relative to ``root`` when given; written to ``out`` (Markdown) when given.
    Returns the table."""
    rows = [census(read_trace(f, repair=False), str(f)) for f in trace_files(traces)]
    table = to_markdown([c for c in rows if c.tries], Path(root) if root else None)
    if out:
        write_markdown(Path(out), table)
    return table
