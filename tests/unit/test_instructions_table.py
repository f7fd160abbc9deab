"""The instruction-placement table is written from the rows and traces evaluate.py keeps, not assembled by hand."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.studies.instructions_table import METHOD_NAMES, read_rows, score_table, write

runner = CliRunner()


def _row(out: Path, seg: str, method: str, case: str, f1: float, commit: str = "abc1234") -> None:
    folder = out / "rows" / "s0" / "test" / seg
    folder.mkdir(parents=True, exist_ok=True)
    row = {"case": case, "method": method, "protocol": "root_seeded", "segmenter": seg, "method_key": "k",
           "commit": commit, "PRE": f1, "REC": f1, "F1": f1, "SSD": 10 * f1, "SD": 1.0, "MES": 0.5}
    (folder / f"{method}-k__root_seeded__{case}.json").write_text(json.dumps(row))


def _trace(out: Path, seg: str, method: str, case: str, sentences: list[str]) -> None:
    path = out / "traces" / "test" / seg / method / f"{case}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"type": "decision", "role": "advisor", "round": 0, "block": i, "defect": 0,
                         "decision": {"instruction": s}}) for i, s in enumerate(sentences)]
    path.write_text("\n".join(lines) + "\n")


def _fill(out: Path) -> None:
    for seg in ("unet3d", "nnunet_style"):
        for method, f1 in (("initial", 0.5), ("neurorefiner", 0.7), ("nr_centred", 0.6)):
            for case, shift in (("OP_7", 0.0), ("OP_9", 0.1)):
                _row(out, seg, method, case, f1 + shift)
        _trace(out, seg, "neurorefiner", "OP_9",
               ["Repair break at top-left-rear", "Repair break at center-center-center"])
        _trace(out, seg, "nr_centred", "OP_9", ["Repair break at center-center-center"] * 2)


def test_the_table_pools_per_segmenter_and_bolds_its_best(tmp_path: Path) -> None:
    _fill(tmp_path)
    table = score_table(read_rows(tmp_path, "test"), METHOD_NAMES)
    lines = table.splitlines()
    assert lines[0].startswith("| masks | method | F1[OP_7] | F1[OP_9] | PRE | REC | F1 | SSD |")
    assert len(lines) == 2 + 6
    assert lines[2].startswith("| 3D U-Net | initial | 50.00 | 60.00 |")
    assert "| **75.00** |" in lines[3] and "neurorefiner (frames placed" in lines[3]  # best of the U-Net's rows
    assert "**" not in lines[4] and lines[5].startswith("| nnU-Net-style | initial |")


def test_the_written_file_carries_commit_and_census(tmp_path: Path) -> None:
    _fill(tmp_path)
    target = tmp_path / "table.md"
    write(tmp_path, "test", target, "bash x.sh")
    text = target.read_text()
    assert "by `bash x.sh` (rows at commit `abc1234`)" in text
    assert "| unet3d/nr_centred/OP_9.jsonl" in text or "test/unet3d/nr_centred/OP_9" in text
    assert "Repair break at center-center-center (2)" in text  # the constant sentence, both defects
    assert "- 3D U-Net masks: F1 75.00 with frames placed as training crops against 65.00 with centred" in text
    assert "frames centred on each edit): 4 defects over 2 traces got 2 distinct sentences" in text


def test_rows_of_two_commits_are_named_both(tmp_path: Path) -> None:
    _fill(tmp_path)
    _row(tmp_path, "unet3d", "initial", "OP_8", 0.4, commit="def5678+dirty")
    text = write(tmp_path, "test", tmp_path / "t.md", "cmd")
    assert "commits `abc1234`, `def5678+dirty`" in text


def test_no_rows_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["study", "instructions-table", str(tmp_path), "--target", str(tmp_path / "t.md")])
    assert result.exit_code == 2 and "no test rows" in result.output
    assert not (tmp_path / "t.md").exists()


def test_rows_of_other_methods_in_the_same_out_dir_stay_out(tmp_path: Path) -> None:
    """OUT is shared with other tables (experiment=table_6_budget writes its t6b_* rows there)."""
    _fill(tmp_path)
    _row(tmp_path, "unet3d", "t6b_cab", "OP_7", 0.99)
    text = write(tmp_path, "test", tmp_path / "t.md", "cmd")
    assert "t6b_cab" not in text and "99.00" not in text


def test_rows_table_cli_labels_and_orders_the_named_methods(tmp_path: Path) -> None:
    _fill(tmp_path)
    target = tmp_path / "check.md"
    result = runner.invoke(app, ["make", "rows-table", str(tmp_path), "--method",
                                 "nr_centred=candidate at 3,677 steps", "--method", "initial", "--title", "Check",
                                 "--command", "c.sh", "--target", str(target)])
    assert result.exit_code == 0, result.output
    lines = target.read_text().splitlines()
    assert lines[0] == "# Check" and "by `c.sh` (rows at commit `abc1234`)" in lines[2]
    body = [line for line in lines if line.startswith("| 3D U-Net")]
    assert [line.split(" | ")[1] for line in body] == ["candidate at 3,677 steps", "initial"]
    assert "neurorefiner" not in target.read_text().split("| masks")[1]


def test_rows_table_names_the_stale_rows_an_earlier_run_left_instead_of_a_traceback(tmp_path: Path) -> None:
    """Re-running a script after a change of code left the earlier run's rows beside the new ones in one out_dir;
    rows-table then stopped with a ValueError traceback from inside the summary."""
    _fill(tmp_path)
    stale = {"case": "OP_7", "method": "initial", "protocol": "root_seeded", "segmenter": "unet3d",
             "method_key": "old", "commit": "0ld0000", "PRE": 0.1, "REC": 0.1, "F1": 0.1, "SSD": 1.0}
    (tmp_path / "rows" / "s0" / "test" / "unet3d" / "initial-old__root_seeded__OP_7.json").write_text(json.dumps(stale))
    target = tmp_path / "check.md"
    result = runner.invoke(app, ["make", "rows-table", str(tmp_path), "--method", "initial", "--title", "Check",
                                 "--command", "c.sh", "--target", str(target)])
    assert result.exit_code == 2, result.output
    assert "key old: 1 row(s) at commit `0ld0000`" in result.output and "initial-<key>__" in result.output
    assert not target.exists()
