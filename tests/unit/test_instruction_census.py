"""The instruction census counts what the Advisor said, per defect, from a trace."""

import json

import pytest
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.studies.instruction_census import census, trace_files


def _advisor(block, defect, sentence, kind="FN", rnd=0):
    decision = {"instruction": sentence, "frame": {}} if sentence else None
    return {"type": "decision", "role": "advisor", "round": rnd, "block": block, "defect": defect,
            "defect_kind": kind, "decision": decision}


def test_defects_sharing_a_sentence_are_counted_once_each_and_retries_of_one_defect_are_not_sharing():
    records = [
        {"type": "run", "settings": {}},
        _advisor(1, 0, "Repair break at center-center-center"),
        _advisor(1, 0, "Repair break at center-center-center"),  # a retry of the same defect
        _advisor(2, 0, "Repair break at center-center-center"),  # another place, same sentence
        _advisor(2, 1, "Connect neuron from top-left-rear to center-center-center"),
        _advisor(3, 0, None),  # gave up
        {"type": "decision", "role": "editor", "block": 1, "defect": 0},
    ]
    c = census(records, "t")
    assert (c.tries, c.defects, c.distinct, c.shared, c.no_sentence) == (5, 4, 2, 2, 1)
    assert c.most_common == "Repair break at center-center-center" and c.most_common_defects == 2


def test_a_constant_sentence_is_seen_as_one_sentence_for_every_defect():
    c = census([_advisor(b, 0, "Repair break at center-center-center") for b in range(6)])
    assert c.distinct == 1 and c.shared == 6


def test_the_command_writes_its_table_and_names_a_folder_without_traces(tmp_path, capsys):
    run = tmp_path / "traces" / "OP_1.jsonl"
    run.parent.mkdir()
    run.write_text("".join(json.dumps(r) + "\n" for r in [_advisor(1, 0, "Repair break at top-center-center"),
                                                          _advisor(2, 0, "Repair break at center-left-center")]))
    out = tmp_path / "census.md"
    runner = CliRunner()
    result = runner.invoke(app, ["study", "instruction-census", str(tmp_path / "traces"), "--out", str(out),
                                 "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "| traces/OP_1.jsonl | 2 | 2 | 2 | 0 | 0 |" in text and text == result.output
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty: no trace"):
        trace_files([empty])
    result = runner.invoke(app, ["study", "instruction-census", str(empty)])
    assert result.exit_code == 2 and "no trace" in result.output
