"""Figure tables in the Markdown docs (README.md, docs/results.md), rendered from the committed table CSVs.

A figure a doc copies by hand drifts from its table file the day the table is rebuilt; a figure block is
rewritten from the file instead, and ``neurorefiner make doc-tables --check`` (and a unit test) fail while a
block differs from what its CSV gives. A block is a Markdown table between two comments, which every Markdown
viewer hides::

    <!-- table: experiments/table_diadem/table_diadem.csv cols=label,F1,SSD rows=1-3,6 bold -->

    | Method | F1↑ | SSD↓ |
    ...

    <!-- /table -->

The path is relative to the repository root. Options, space-separated (values hold no spaces):

- ``cols=A,B``: the CSV columns shown, in that order (default: every column).
- ``rows=...``: the lines shown, as 1-based positions and ranges (``rows=1-3,6``) or as one column's values
  (``rows=method:initial|neurorefiner``); CSV order is kept.
- ``mean=A,B``: one line per distinct (A, B), every numeric column averaged over the CSV lines sharing them and
  their count as ``n``: a study's per-volume CSV summarised as its own Markdown file summarises it.
- ``bold``: per metric column, the best figure among the lines shown **bold**, the second <u>underlined</u>,
  as the paper tables mark theirs.

Figures print as the table's Markdown file prints them (:func:`neurorefiner.evaluation.paper_tables.format_cell`:
PRE/REC/F1/MES in %, two decimals); a column of whole numbers (``n``) prints as such, text as it is. A paper
table's paired difference (``dF1_initial``, ``dF1_classical``, from
:func:`neurorefiner.evaluation.paper_tables.paired_columns`) is one column here, headed and printed as the table
prints it (``ΔF1 initial``, ``+2.31 [+0.40, +4.10] 9↑/2↓``); its part columns (``dF1_initial_lo``, ...) are left
out of a block without ``cols``. A CSV made before the paired columns lacks them: a block naming one fails, a
block without ``cols`` shows the rest."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.paper_tables import PAIRED_PARTS, format_cell, is_paired, paired_cell, paired_header, ranks
from neurorefiner.evaluation.tables import LOWER_IS_BETTER, PAPER_METRICS
from neurorefiner.io.atomic import write_text_atomic

DOCS: tuple[str, ...] = ("README.md", "docs/results.md")
BLOCK = re.compile(r"^<!-- table: (?P<spec>[^\n]*?) -->\n(?P<body>.*?)^<!-- /table -->$", re.M | re.S)
OPENING = re.compile(r"^<!-- table:", re.M)
HEADERS = {"label": "Method"}


@dataclass(frozen=True)
class Spec:
    """What one block shows: its CSV and the selection written in its opening comment."""

    csv: str
    cols: tuple[str, ...] = ()
    rows: str = ""
    mean: tuple[str, ...] = ()
    bold: bool = False


@dataclass(frozen=True)
class Block:
    """One figure block of a doc: where it opens (``doc``, 1-based ``line``), what it asks for and the table it
    holds now beside the table its CSV gives."""

    doc: Path
    line: int
    spec: Spec
    held: str
    rendered: str = field(repr=False)

    @property
    def stale(self) -> bool:
        return self.held != self.rendered

    def where(self, root: Path | None = None) -> str:
        """``doc:line (csv)``, the doc relative to ``root`` where it lies under it: what a person opens."""
        doc = self.doc
        if root is not None and doc.resolve().is_relative_to(root.resolve()):
            doc = doc.resolve().relative_to(root.resolve())
        return f"{doc}:{self.line} ({self.spec.csv})"


def parse_spec(text: str, doc: Path | str = "<doc>", line: int | None = None) -> Spec:
    """The opening comment's text (``PATH key=value ... bold``) as a :class:`Spec`; an unknown option is an
    error naming the doc and line, never an option silently ignored."""
    words = text.split()
    if not words:
        raise InputError("a table block names no CSV: <!-- table: experiments/<folder>/<file>.csv ... -->", doc, line)
    opts: dict[str, str] = {}
    bold = False
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if word == "bold":
            bold = True
        elif eq and key in {"cols", "rows", "mean"} and value:
            opts[key] = value
        else:
            raise InputError(f"unknown table option {word!r} (cols=A,B, rows=1-3,6 or rows=COL:v1|v2, mean=A,B, "
                             "bold)", doc, line)
    return Spec(words[0], _names(opts.get("cols", "")), opts.get("rows", ""), _names(opts.get("mean", "")), bold)


def _names(value: str) -> tuple[str, ...]:
    return tuple(name for name in value.split(",") if name)


def read_csv(path: Path) -> list[dict[str, str]]:
    """A table file's lines as dicts (every value a string, as written)."""
    if not path.is_file():
        raise InputError("no such table file", path)
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def _number(value: object) -> float:
    return float(value) if _is_number(value) else math.nan  # type: ignore[arg-type]


def mean_lines(lines: Sequence[dict[str, str]], keys: Sequence[str]) -> list[dict[str, object]]:
    """One line per distinct value of ``keys`` (first-seen order): ``keys``, ``n`` (lines averaged) and the mean of
    every column whose values are all numbers; other columns (a case name, a JSON cell) are dropped. The mean is
    numpy's, as the studies' own Markdown files take it, so the two print the same figure."""
    import numpy as np

    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for line in lines:
        groups.setdefault(tuple(line.get(k, "") for k in keys), []).append(line)
    out: list[dict[str, object]] = []
    for values, members in groups.items():
        row: dict[str, object] = {**dict(zip(keys, values)), "n": len(members)}
        for column in members[0]:
            if column not in keys and column != "n" and all(_is_number(m.get(column)) for m in members):
                row[column] = float(np.mean([float(m[column]) for m in members]))
        out.append(row)
    return out


def select_rows(lines: list[dict[str, object]], rows: str, source: Path | str = "") -> list[dict[str, object]]:
    """The lines a ``rows=`` option names: ``COL:v1|v2`` keeps the lines whose COL is one of the values,
    otherwise 1-based positions and ``a-b`` ranges; CSV order either way."""
    if not rows:
        return lines
    if ":" in rows:
        column, _, values = rows.partition(":")
        wanted = set(values.split("|"))
        if lines and column not in lines[0]:
            raise InputError(f"rows={rows}: no column {column!r}", source)
        return [line for line in lines if str(line.get(column, "")) in wanted]
    keep: set[int] = set()
    for part in rows.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise InputError(f"rows={rows}: positions are 1-based numbers and ranges (1-3,6)", source)
        keep.update(range(int(first), int(last or first) + 1))
    if not keep or max(keep) > len(lines) or min(keep) < 1:
        raise InputError(f"rows={rows}: the table has {len(lines)} lines", source)
    return [line for i, line in enumerate(lines, 1) if i in keep]


def _is_metric(column: str) -> bool:
    base = column.split("[")[0]
    return base in PAPER_METRICS or base in LOWER_IS_BETTER


def _header(column: str) -> str:
    if _is_metric(column):
        return f"{column}{'↓' if column.split('[')[0] in LOWER_IS_BETTER else '↑'}"
    return HEADERS.get(column, column)


def _cell(column: str, value: object) -> str:
    """A figure as its table file prints it (a missing figure as an en dash); a whole number (a count) as a whole
    number; text as it is (a missing check mark stays empty)."""
    if value is None or value == "":
        return "–" if _is_metric(column) else ""
    if not _is_number(value):
        return str(value)
    number = float(value)  # type: ignore[arg-type]
    if not _is_metric(column) and math.isfinite(number) and number == int(number):
        return str(int(number))
    return format_cell(column, number)


def render(root: Path, spec: Spec) -> str:
    """The Markdown table a block holds: the CSV's lines (averaged by ``mean``, chosen by ``rows``), its
    ``cols`` in order, best bold and second underlined per metric column where ``bold`` asks for it."""
    path = root / spec.csv
    lines: list[dict[str, object]] = list(read_csv(path))
    unknown = [k for k in spec.mean if lines and k not in lines[0]]
    if unknown:
        raise InputError(f"mean={','.join(spec.mean)}: no column {', '.join(unknown)}", path)
    if spec.mean:
        lines = mean_lines(lines, spec.mean)  # type: ignore[arg-type]
    lines = select_rows(lines, spec.rows, path)
    paired = {c for c in (lines[0] if lines else ()) if is_paired(c, lines[0])}
    parts = {f"{c}{p}" for c in paired for p in PAIRED_PARTS[1:]}
    cols = list(spec.cols or [c for c in (lines[0] if lines else ()) if c not in parts])
    missing = [c for c in cols if lines and c not in lines[0]]
    if missing:
        raise InputError(f"no column {', '.join(missing)} (it has {', '.join(map(str, lines[0]))})", path)
    marks = {c: ranks([{"n": 1, c: _number(line.get(c))} for line in lines], c)
             for c in cols if spec.bold and _is_metric(c)}
    out = ["| " + " | ".join(paired_header(c) if c in paired else _header(c) for c in cols) + " |",
           "|" + "---|" * len(cols)]
    for i, line in enumerate(lines):
        cells = []
        for c in cols:
            text = paired_cell(line, c) if c in paired else _cell(c, line.get(c))
            rank = marks.get(c, {}).get(i)
            cells.append(f"**{text}**" if rank == 1 else f"<u>{text}</u>" if rank == 2 else text)
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _wrap(table: str) -> str:
    """A block's body: the table with a blank line either side, so no Markdown reader takes the closing comment
    for one more table row."""
    return f"\n{table}\n"


def blocks(doc: Path, root: Path, text: str | None = None) -> list[Block]:
    """Every figure block of ``doc`` with the table it holds and the one its CSV gives. An opening comment
    without its ``<!-- /table -->`` is an error, not a block skipped."""
    text = doc.read_text() if text is None else text
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        spec = parse_spec(match["spec"], doc, line)
        found.append(Block(doc, line, spec, match["body"], _wrap(render(root, spec))))
    opened = len(OPENING.findall(text))
    if opened != len(found):
        raise InputError(f"{opened} table blocks open but {len(found)} close with <!-- /table -->", doc)
    return found


def refreshed(doc: Path, root: Path) -> tuple[str, list[Block]]:
    """``doc``'s text with every block rewritten from its CSV, and the blocks that were stale."""
    text = doc.read_text()
    found = {b.line: b for b in blocks(doc, root, text)}

    def swap(match: re.Match[str]) -> str:
        block = found[text.count("\n", 0, match.start()) + 1]
        return text[match.start():match.start("body")] + block.rendered + text[match.end("body"):match.end()]

    return BLOCK.sub(swap, text), [b for b in found.values() if b.stale]


def doc_paths(root: Path, docs: Iterable[str | Path] = DOCS) -> list[Path]:
    """The docs a check covers, relative to ``root`` unless given absolute."""
    return [Path(d) if Path(d).is_absolute() else root / d for d in docs]


def stale_blocks(root: Path, docs: Iterable[str | Path] = DOCS) -> list[Block]:
    """Every block of ``docs`` that differs from what its CSV gives (empty when the docs are up to date)."""
    return [b for doc in doc_paths(root, docs) for b in blocks(doc, root) if b.stale]


def write_docs(root: Path, docs: Iterable[str | Path] = DOCS) -> list[Block]:
    """Rewrite every stale block of ``docs`` in place; each doc is replaced whole (atomically) or not at all,
    and a doc with nothing stale is not touched. Returns the blocks rewritten."""
    rewritten = []
    for doc in doc_paths(root, docs):
        text, stale = refreshed(doc, root)
        if stale:
            write_text_atomic(doc, text)
            rewritten += stale
    return rewritten
