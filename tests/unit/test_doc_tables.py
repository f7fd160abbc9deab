"""The figure tables of README.md and docs/results.md are written from the committed table CSVs
(``neurorefiner make doc-tables``), never typed in: a block renders as its table's own Markdown file prints the
figures, a block that differs from its CSV is caught, and the real docs hold no stale block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.errors import InputError
from neurorefiner.evaluation.doc_tables import DOCS, blocks, parse_spec, render, stale_blocks, write_docs

ROOT = Path(__file__).resolve().parents[2]
CSV = """method,label,n,SSD,F1,case
initial,Initial masks,3,32.42452103233,0.7593478200955591,OP_7
classical,Classical,3,31.399598940081475,0.7924923265547191,OP_7
neurorefiner,NeuroRefiner,3,31.647462108257525,0.7840924784471297,OP_8
classical,Classical,0,,,OP_8
"""
OPEN = "<!-- table: t.csv cols=label,n,SSD,F1 rows=1-3 bold -->"
FRESH = """| Method | n | SSD↓ | F1↑ |
|---|---|---|---|
| Initial masks | 3 | 32.42 | 75.93 |
| Classical | 3 | **31.40** | **79.25** |
| NeuroRefiner | 3 | <u>31.65</u> | <u>78.41</u> |
"""


def _doc(tmp_path: Path, table: str) -> Path:
    (tmp_path / "t.csv").write_text(CSV)
    doc = tmp_path / "doc.md"
    doc.write_text(f"# A doc\n\nProse 78.41.\n\n{OPEN}\n\n{table}\n<!-- /table -->\n\nMore prose.\n")
    return doc


def test_a_block_renders_its_csv_as_the_tables_print_figures(tmp_path: Path) -> None:
    _doc(tmp_path, FRESH)
    assert render(tmp_path, parse_spec(OPEN[len("<!-- table: "):-len(" -->")])) == FRESH
    by_value = render(tmp_path, parse_spec("t.csv rows=method:classical cols=label,n,F1"))
    assert by_value.splitlines()[2:] == ["| Classical | 3 | 79.25 |", "| Classical | 0 | – |"]
    mean = render(tmp_path, parse_spec("t.csv mean=case cols=case,n,F1"))
    assert mean.splitlines()[2:] == ["| OP_7 | 2 | 77.59 |", "| OP_8 | 2 | – |"]  # a missing figure is no figure


def test_a_block_that_differs_from_its_csv_is_found_and_rewritten(tmp_path: Path) -> None:
    doc = _doc(tmp_path, FRESH.replace("78.41", "78.37"))
    [stale] = stale_blocks(tmp_path, [doc])
    assert stale.line == 5 and stale.spec.csv == "t.csv"
    before = doc.read_text()
    assert [b.line for b in write_docs(tmp_path, [doc])] == [5]
    assert doc.read_text() == before.replace("78.37", "78.41")  # the prose outside the block is left alone
    assert not stale_blocks(tmp_path, [doc])


def test_the_command_checks_and_rewrites(tmp_path: Path) -> None:
    doc = _doc(tmp_path, FRESH.replace("31.40", "31.39"))
    runner = CliRunner()
    checked = runner.invoke(app, ["make", "doc-tables", "--check", "--root", str(tmp_path), str(doc)])
    assert checked.exit_code == 1 and "doc.md:5 (t.csv)" in checked.output
    assert "31.39" in doc.read_text()  # --check writes nothing
    assert runner.invoke(app, ["make", "doc-tables", "--root", str(tmp_path), str(doc)]).exit_code == 0
    assert runner.invoke(app, ["make", "doc-tables", "--check", "--root", str(tmp_path), str(doc)]).exit_code == 0


@pytest.mark.parametrize("spec", ["t.csv cols=nope", "t.csv rows=9", "t.csv rows=x:1", "t.csv mean=nope",
                                  "t.csv colour=red", "missing.csv"])
def test_a_bad_block_is_an_error_not_a_skipped_block(tmp_path: Path, spec: str) -> None:
    _doc(tmp_path, FRESH)
    with pytest.raises(InputError):
        render(tmp_path, parse_spec(spec))
    unclosed = tmp_path / "unclosed.md"
    unclosed.write_text(f"{OPEN}\n{FRESH}")
    with pytest.raises(InputError, match="close"):
        blocks(unclosed, tmp_path)


def test_a_block_prints_exactly_what_its_table_file_prints() -> None:
    """The paper table's own Markdown (paper_tables.markdown) and its CSV rendered with the same columns agree
    line for line, bold and underline included (and the paired columns, once the table is made with them)."""
    md = (ROOT / "experiments/table_diadem/table_diadem.md").read_text()
    table = re.search(r"^\| Method .*?\n(?=\n)", md, re.M | re.S)
    assert table is not None
    heads = table[0].splitlines()[0].strip("| ").split(" | ")
    # "ΔF1 initial" is the paired column dF1_initial (paper_tables.paired_columns), where the table has one
    cols = ["label" if h == "Method" else "d" + h[1:].replace(" ", "_") if h.startswith("Δ") else h.rstrip("↑↓")
            for h in heads]
    assert render(ROOT, parse_spec(f"experiments/table_diadem/table_diadem.csv cols={','.join(cols)} bold")) == table[0]


def test_the_docs_figure_tables_match_their_table_files() -> None:
    """README.md and docs/results.md: every block as its CSV gives it (run `make docs-tables` after a table is
    rebuilt), and the README's headline table is one of them."""
    stale = stale_blocks(ROOT)
    assert not stale, "stale figure blocks (run `neurorefiner make doc-tables`): " + ", ".join(
        b.where(ROOT) for b in stale)
    readme = blocks(ROOT / DOCS[0], ROOT)
    assert any(b.spec.csv == "experiments/table_diadem/table_diadem.csv" for b in readme)
