"""The segmenter tables' writer and reader (neurorefiner.evaluation.segmenter_rows, `neurorefiner make segmenter-rows`):
per-segmenter runs merge into one table without recomputation, and a file that is not a rows table is refused by
name."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import neurorefiner.evaluation.segmenter_rows as rows_mod
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError


def _row(method: str, case: str, f1: float) -> dict:
    return {**{k: 0.0 for k in rows_mod.COLS}, "method": method, "case": case, "F1": f1, "SSD": 10 * f1}


def test_tables_roundtrip_and_merge_in_first_seen_order(tmp_path):
    a = [_row("floor, largest", "OP_7", 0.5), _row("floor, largest", "OP_8", 0.7)]
    b = [_row("vnet -> APP2", "OP_7", 0.2), _row("vnet -> APP2", "OP_8", 0.4)]
    rows_mod.write_tables(a, tmp_path / "a", "t", "first")
    rows_mod.write_tables(b, tmp_path / "b", "t", "second")
    merged = rows_mod.read_rows(tmp_path / "a" / "t_cases.csv") + rows_mod.read_rows(tmp_path / "b" / "t_cases.csv")
    assert merged[0]["F1"] == 0.5 and merged[0]["method"] == "floor, largest"
    text = rows_mod.write_tables(merged, tmp_path, "all", "merged")
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and "method" not in ln]
    assert [ln.split(" | ")[0] for ln in lines] == ["| floor, largest", "| vnet -> APP2"]
    assert "| 0.600 |" in lines[0] and "| 0.300 |" in lines[1]  # F1 means
    assert not list(tmp_path.glob("*.part"))
    png = rows_mod.plot_rows(merged, tmp_path / "all.png", "merged")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_read_rows_refuses_other_files(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="x.csv"):
        rows_mod.read_rows(bad)
    with pytest.raises(InputError, match="not found"):
        rows_mod.read_rows(tmp_path / "missing.csv")


def test_merged_runs_keep_one_row_per_method_and_case():
    fresh = [_row("floor, largest", "OP_7", 0.5)]
    archived = [_row("floor, largest", "OP_7", 0.4), _row("unet3d:old -> APP2", "OP_7", 0.6)]
    merged = rows_mod.first_of_each(fresh + archived)
    assert [(r["method"], r["F1"]) for r in merged] == [("floor, largest", 0.5), ("unet3d:old -> APP2", 0.6)]


class _Case:
    def __init__(self, name: str):
        self.name, self.info = name, {"synthetic": True}

    def image(self):
        raise AssertionError("a pure merge loaded a volume")


class _Dataset:
    def cases(self, split: str) -> list[_Case]:
        return [_Case("a"), _Case("b")]


def test_a_pure_merge_loads_no_volume_and_the_first_include_wins(tmp_path, monkeypatch):
    """run_synthetic.sh merges a scored table into the preset's under a lock: that merge must be quick (no
    volume loaded, no gold rasterised) and a re-evaluated network's new rows must replace its old ones."""
    monkeypatch.setattr(rows_mod, "get_dataset", lambda name: _Dataset())
    rows_mod.write_tables([_row("vnet -> APP2", "a", 0.9), _row("vnet -> APP2", "b", 0.7)], tmp_path / "new", "rows",
                          "new")
    rows_mod.write_tables([_row("floor", "a", 0.1), _row("vnet -> APP2", "a", 0.2), _row("old", "zz", 0.3)],
                          tmp_path / "old", "x_test", "old")
    done = CliRunner().invoke(app, ["make", "segmenter-rows", "--dataset", "x", "--split", "test", "--no-naive",
                                    "--include", str(tmp_path / "new" / "rows_cases.csv"),
                                    "--include", str(tmp_path / "old" / "x_test_cases.csv"),
                                    "--out", str(tmp_path / "old")])
    assert done.exit_code == 0, done.output
    merged = rows_mod.read_rows(tmp_path / "old" / "x_test_cases.csv")
    assert [(r["method"], r["case"], r["F1"]) for r in merged] == [
        ("vnet -> APP2", "a", 0.9), ("vnet -> APP2", "b", 0.7), ("floor", "a", 0.1)]  # case zz is not in the split


def test_bad_input_is_one_line_and_exit_code_2(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_mod, "get_dataset", lambda name: _Dataset())
    runner = CliRunner()
    done = runner.invoke(app, ["make", "segmenter-rows", "--dataset", "x", "--no-naive", "--include",
                               str(tmp_path / "missing_cases.csv"), "--out", str(tmp_path)])
    assert done.exit_code == 2 and "rows file not found" in done.output and "Traceback" not in done.output
    done = runner.invoke(app, ["make", "segmenter-rows", "--dataset", "x", "--no-naive", "--case", "q", "--out",
                               str(tmp_path)])
    assert done.exit_code == 2 and "has no case q" in done.output
    with pytest.raises(InputError, match="arch\\[:variant\\]=checkpoint"):
        rows_mod.parse_segmenter("vnet:=x.pt")


def test_an_unknown_dataset_or_split_is_one_line(tmp_path):
    runner = CliRunner()
    done = runner.invoke(app, ["make", "segmenter-rows", "--dataset", "no_such_set", "--out", str(tmp_path)])
    assert done.exit_code == 2 and "unknown dataset 'no_such_set'" in done.output
    done = runner.invoke(app, ["make", "segmenter-rows", "--dataset", "diadem", "--split", "val",
                               "--out", str(tmp_path)])
    assert done.exit_code == 2 and "has splits" in done.output and "Traceback" not in done.output


def test_segmenter_arguments_name_their_rows_and_mask_folders():
    plain = rows_mod.parse_segmenter("vnet=ck.pt")
    variant = rows_mod.parse_segmenter("vnet:prior=ck2.pt")
    shipped = rows_mod.parse_segmenter("unet3d")
    assert (plain.arch, plain.checkpoint, plain.folder) == ("vnet", "ck.pt", "vnet")
    assert (variant.name, variant.arch, variant.folder) == ("vnet:prior", "vnet", "vnet_prior")
    assert shipped.checkpoint is None


def test_root_seeded_rows_trace_from_the_gold_root_and_say_so(tmp_path):
    """A mask cut in two: the root's short piece and a long piece. APP2 left to itself traces the long one;
    the root-seeded protocol (the SYNTHETIC Tables 1-2 and DIADEM's) must trace the root's piece, and its rows
    must carry a label of their own so they never merge with full-volume rows of the same network."""
    import numpy as np

    from neurorefiner.io.swc import Tree

    xs = np.arange(60, 3, -1)          # the gold root at x = 60
    gold = Tree.from_points(np.stack([np.full(len(xs), 8.0), np.full(len(xs), 8.0), xs], 1),
                            np.arange(len(xs)) - 1, 1.0)
    mask = np.zeros((16, 16, 64), bool)
    mask[7:10, 7:10, 50:61] = True     # the root's piece
    mask[7:10, 7:10, 4:44] = True      # the long piece
    full = rows_mod._traced(gold, mask, (1.0, 1.0, 1.0), "full_volume")
    seeded = rows_mod._traced(gold, mask, (1.0, 1.0, 1.0), "root_seeded")
    assert seeded["REC"] < 0.35 < full["REC"], (seeded["REC"], full["REC"])
    assert rows_mod.APP2_BY_PROTOCOL["root_seeded"] != rows_mod.APP2_BY_PROTOCOL["full_volume"]
    done = CliRunner().invoke(app, ["make", "segmenter-rows", "--dataset", "diadem", "--protocol", "seeded",
                                    "--no-naive", "--out", str(tmp_path)])
    assert done.exit_code == 2 and "--protocol must be one of" in done.output
