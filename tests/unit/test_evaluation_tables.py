"""Paper-style tables: means per method, non-finite values counted not averaged, % for PRE/REC/F1/MES."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from neurorefiner.evaluation.tables import markdown_table, summarize, write_rows_csv

ROWS = [
    {"method": "initial", "case": "a", "SD": 2.0, "SSD": 4.0, "PRE": 0.9, "REC": 0.5, "F1": 0.6, "MES": 0.4},
    {"method": "initial", "case": "b", "SD": 4.0, "SSD": math.inf, "PRE": 0.7, "REC": 0.7, "F1": 0.7, "MES": 0.6},
    {"method": "ours", "case": "a", "SD": 1.0, "SSD": 3.0, "PRE": 1.0, "REC": 1.0, "F1": 1.0, "MES": 1.0},
]


def test_summary_means_and_nonfinite() -> None:
    s = summarize(ROWS)
    assert [r["method"] for r in s] == ["initial", "ours"]
    assert s[0]["SD"] == 3.0 and s[0]["SSD"] == 4.0 and s[0]["SSD_nonfinite"] == 1
    assert abs(s[0]["F1"] - 0.65) < 1e-12


def test_markdown_percent_and_arrows() -> None:
    md = markdown_table(summarize(ROWS))
    assert "SD↓" in md and "F1↑" in md
    assert "| ours | 1 | 1.00 | 3.00 | 100.00 | 100.00 | 100.00 | 100.00 |" in md


def test_rows_csv(tmp_path: Path) -> None:
    path = write_rows_csv(tmp_path / "rows.csv", ROWS)
    with open(path) as fh:
        back = list(csv.DictReader(fh))
    assert len(back) == 3 and back[2]["method"] == "ours"


def test_the_one_csv_writer_keeps_columns_and_refuses_a_dropped_figure(tmp_path: Path) -> None:
    """Named columns in their order (a missing cell empty); a row key outside them is an error unless asked for."""
    import pytest

    path = write_rows_csv(tmp_path / "t.csv", [{"b": 1, "a": "x, y"}, {"a": 2}], ["a", "b"])
    assert path.read_bytes() == b'a,b\r\n"x, y",1\r\n2,\r\n'
    with pytest.raises(ValueError, match="c"):
        write_rows_csv(tmp_path / "u.csv", [{"a": 1, "c": 3}], ["a"])
    assert not (tmp_path / "u.csv").exists()
    write_rows_csv(tmp_path / "u.csv", [{"a": 1, "c": 3}], ["a"], ignore_extra=True)
    assert (tmp_path / "u.csv").read_bytes() == b"a\r\n1\r\n"


def test_provenance_names_command_date_and_commit(monkeypatch) -> None:
    from neurorefiner.evaluation.tables import provenance

    monkeypatch.setattr("neurorefiner.paths.tree_state", lambda *a, **k: ("abc1234", True))
    stamp = provenance("neurorefiner study x")
    assert stamp["command"] == "neurorefiner study x" and stamp["commit"] == "abc1234+dirty"
    assert stamp["date"].endswith(" UTC") and len(stamp["date"]) == len("2026-01-01 00:00 UTC")
