"""The instruction-placement table (``experiments/editor/instructions_test.md``) written from the rows and traces
``evaluate.py`` left, so the committed table comes from a command and carries the commit its rows were made at.

``experiments/editor/instructions_test.sh`` runs ``evaluate.py`` for each segmenter with three methods (the initial
masks, ``neurorefiner`` with frames placed as the editor's training crops, ``nr_centred`` with frames centred on each
edit) into one ``OUT``; each row is kept as ``OUT/rows/<settings>/<split>/<segmenter>/<method>-<key>__<protocol>__
<case>.json``. This reads those rows (``per_volume.csv`` holds only the last ``evaluate.py`` call's), one line per
(segmenter, method) with F1 per case and the pooled means, then appends the sentence census of the traces
(:mod:`neurorefiner.studies.instruction_census`).

``neurorefiner study instructions-table OUT --split test --target experiments/editor/instructions_test.md``
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from neurorefiner.agents.trace import read_trace
from neurorefiner.evaluation.rows_table import SEGMENTER_NAMES, order, read_rows, score_table, stamp
from neurorefiner.evaluation.tables import summarize, write_markdown
from neurorefiner.studies.instruction_census import Census, census, to_markdown, trace_files

METHOD_NAMES = {"initial": "initial", "neurorefiner": "neurorefiner (frames placed as training crops)",
                "nr_centred": "nr_centred (frames centred on each edit)"}


def findings(rows: Sequence[dict], traces: Sequence[Census]) -> str:
    """What the table says, in numbers read from it: F1 of placed against centred frames per segmenter, and how
    many distinct sentences each placement gave its defects."""
    lines = ["What it says:"]
    for seg in order(rows, "segmenter", list(SEGMENTER_NAMES)):
        f1 = {s["method"]: s["F1"] for s in summarize([r for r in rows if r["segmenter"] == seg], group="method",
                                                       metrics=("F1",))}
        if {"neurorefiner", "nr_centred"} <= f1.keys():
            lines.append(f"- {SEGMENTER_NAMES.get(seg, seg)} masks: F1 {100 * f1['neurorefiner']:.2f} with frames "
                         f"placed as training crops against {100 * f1['nr_centred']:.2f} with centred frames.")
    for method in ("neurorefiner", "nr_centred"):
        mine = [c for c in traces if f"/{method}-" in c.trace or f"/{method}/" in c.trace]
        if mine:
            lines.append(f"- {METHOD_NAMES[method]}: {sum(c.defects for c in mine)} defects over {len(mine)} "
                         f"traces got {sum(c.distinct for c in mine)} distinct sentences (counted per trace; a "
                         f"retried defect can get a second one); {sum(c.shared for c in mine)} defects share a "
                         "sentence with another.")
    lines.append("- Sentences repeat even with placed frames: a short break has both ends in one of the grammar's "
                 "27 cells, so it reads `Repair break at <cell>`, and a frame placed as a training crop puts the "
                 "gap's centre in the middle cell on every axis with probability (2/3)^3 = 0.30. A distinct "
                 "sentence per defect would need a finer grammar than 3x3x3 cells, or frames placed off the "
                 "training distribution.")
    return "\n".join(lines) + "\n"


def write(out: Path, split: str, target: Path, command: str) -> str:
    """Write the table and the census to ``target`` (atomically) and return the text."""
    rows = read_rows(out, split, list(METHOD_NAMES))
    traces = trace_files([out / "traces" / split])
    counted = [c for c in (census(read_trace(t, repair=False), str(t)) for t in traces) if c.tries]
    text = (f"# The learned Advisor's sentences on DIADEM {split} (real data, held out)\n\n"
            f"Made {time.strftime('%Y-%m-%d', time.gmtime())} by `{command}` (rows at {stamp(rows)}). Root-seeded "
            "APP2, default learned agents and the shipped editor; `nr_centred` differs from `neurorefiner` only in "
            "`advisor.placement=centred`. F1, PRE, REC in %, SSD in voxels; the pooled columns are means over "
            "the stacks.\n\n" + score_table(rows, METHOD_NAMES) +
            "\nThe sentences in the traces (a defect is one (round, block, index) of the loop; a stack whose "
            "Inspector proposes nothing has no Advisor call and no line):\n\n"
            + to_markdown(counted, out / "traces") + "\n" + findings(rows, counted))
    write_markdown(target, text)
    return text
