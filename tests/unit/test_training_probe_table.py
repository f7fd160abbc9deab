"""The training probe's tables, read back from the files their runs left (these were scripts under experiments/;
they are studies with commands now)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from neurorefiner.cli.main import app

runner = CliRunner()
HEAD = {"raw gap filled, synthetic breaks": 0.5, "raw gap filled, real breaks": None, "wrong place: unchanged": 0.9,
        "opposite: unchanged": 0.25}
SUMMARY = [{"kind": "break", "variant": "correct", "reconnected": 0.4}]


def _score(folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps({"items": {"break": 2}, "threshold": 0.5, "headline": HEAD,
                                                     "summary": SUMMARY}))


def test_probe_table_rows_in_the_order_named_and_the_missing_said(tmp_path: Path) -> None:
    _score(tmp_path, "b")
    _score(tmp_path, "a")
    result = runner.invoke(app, ["study", "probe-table", str(tmp_path), "a=first, with a comma", "b=second", "c=gone"])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "summary.md").read_text()
    assert text == result.output
    lines = text.splitlines()
    assert lines[2] == "| a | first, with a comma | 0.5 | 0.500 | - | 0.900 | 0.250 | 0.400 |"
    assert lines[3].startswith("| b | second |") and lines[4].startswith("| target |")
    assert lines[-2:] == ["Held-out defects per kind: {'break': 2}.", "Not scored (no json): c."]
    bad = runner.invoke(app, ["study", "probe-table", str(tmp_path), "no_label"])
    assert bad.exit_code == 2 and "NAME=" in bad.output


def test_loss_probe_table_keeps_each_variants_cost_beside_its_scores(tmp_path: Path) -> None:
    results, runs = tmp_path / "results", tmp_path / "runs"
    _score(results, "shipped_stage1")
    _score(results, "residual_edit10")
    (runs / "residual_edit10").mkdir(parents=True)
    (runs / "residual_edit10" / "progress.json").write_text(json.dumps({"current": {"steps": 150, "cpu_s": 342}}))
    result = runner.invoke(app, ["study", "loss-probe-table", "--results", str(results), "--runs", str(runs)])
    assert result.exit_code == 0, result.output
    assert (results / "residual_edit10_progress.json").exists()   # the table can be rebuilt once the runs are gone
    lines = (results / "summary.md").read_text().splitlines()
    assert lines[2].startswith("| shipped_stage1 | shipped stage 1 (the start of every variant, 0 steps) | 0 / 0 |")
    assert lines[3].startswith("| residual_edit10 | loss on the change (residual), edit weight 10 | 150 / 5.7 |")
    assert lines[4] == "| target | | | >= 0.60 | >= 0.40 | >= 0.95 | >= 0.90 |"
    empty = runner.invoke(app, ["study", "loss-probe-table", "--results", str(tmp_path / "none")])
    assert empty.exit_code == 2 and "no scores" in empty.output
