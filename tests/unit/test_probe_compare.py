"""Editor probes side by side: the figures read from each probe's summary, kinds pooled by their edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurorefiner.errors import InputError
from neurorefiner.studies.probe_compare import compare_probes

HEADER = "kind,variant,decoding,edits,unchanged,reconnected,gap_filled,false_merge,noise_removed,date,commit\n"
ROWS = ("break,correct,raw,10,0.2,0.1,0.25,0.0,,d,c1\n"
        "break,wrong_location,raw,10,1.0,0.0,0.0,0.0,,d,c1\n"
        "noise,wrong_location,raw,30,0.6,,,0.0,0.0,d,c1\n"
        "noise,correct,raw,30,0.0,,,0.0,0.9,d,c1\n")


def test_probes_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "editor_probe.csv").write_text(HEADER + ROWS)
    md = compare_probes([("A", tmp_path / "a"), ("B", tmp_path / "b")], tmp_path / "t.md", "T").read_text()
    a = next(line for line in md.splitlines() if line.startswith("| A |")).split(" | ")
    assert a[1] == "0.25" and a[3] == "0.90" and a[4] == "–"
    assert a[5] == "0.70"                      # wrong place: (10 x 1.0 + 30 x 0.6) / 40
    assert "| B | not run" in md and "d, c1" in md


def test_a_file_that_is_not_a_probe_is_named(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "editor_probe.csv").write_text("x,y\n1,2\n")
    with pytest.raises(InputError, match="editor_probe.csv"):
        compare_probes([("A", tmp_path / "a")], tmp_path / "t.md", "T")
