"""The rest of the ``neurorefiner`` commands, held to the rule make-shards follows: an option out of range, a
name that is not there or an empty input is one line, exit 2 and nothing written, before any work; no command
builds on a folder another run made with other settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.io import write_volume
from tests.unit.test_shard_folder import one_line_exit_2


@pytest.mark.parametrize(("args", "words"), [
    (["--dataset", "diademm"], ["unknown dataset 'diademm'", "diadem, "]),
    (["--dataset", "diadem", "--split", "tset"], ["has splits", "'tset'"]),
    (["--dataset", "diadem", "--segmenter", "otsu", "--overlap", "1.5"], ["--overlap", "[0, 1)"]),
    (["--dataset", "diadem", "--segmenter", "otsu", "--threshold", "2"], ["--threshold", "(0, 1)"]),
    (["--dataset", "diadem", "--segmenter", "otsu", "--dust", "-1"], ["--dust", ">= 0"]),
    (["--dataset", "diadem", "--segmenter", "no_such_net"], ["no checkpoint for 'no_such_net'"]),
])
def test_init_masks_checks_before_any_work(tmp_path: Path, args: list[str], words: list[str]) -> None:
    out = tmp_path / "masks"
    one_line_exit_2(CliRunner().invoke(app, ["init-masks", *args, "--out", str(out)]), *words)
    assert not out.exists()


def test_init_masks_of_another_overlap_are_made_anew(tmp_path: Path) -> None:
    """The cached masks were reused whatever ``--overlap`` asked for (it was not among the settings compared)."""
    from neurorefiner.inference.init_masks import _same_settings

    made = {"checkpoint_sha256": "abc", "postprocess": {"threshold": 0.5}, "window": "default", "overlap": 0.25}
    assert _same_settings(made, dict(made))
    assert not _same_settings(made, {**made, "overlap": 0.5})
    assert _same_settings({k: v for k, v in made.items() if k != "overlap"}, made)  # older manifests: the default


def test_train_judge_names_the_datasets_there_are(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train-judge", "--dataset", "diademm", "--out", str(tmp_path / "j.json")])
    one_line_exit_2(result, "unknown dataset 'diademm'", "tiny")
    assert not (tmp_path / "j.json").exists()


def test_inspect_block_size_is_checked_before_reading(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["inspect", str(tmp_path / "missing.tif"), str(tmp_path / "missing.tif"),
                                      "--block-size", "0"])
    one_line_exit_2(result, "--block-size", ">= 1")


def test_score_refuses_an_empty_gold_tracing(tmp_path: Path) -> None:
    (tmp_path / "gold.swc").write_text("# no nodes\n")
    (tmp_path / "pred.swc").write_text("1 3 1 1 1 1 -1\n2 3 2 1 1 1 1\n")
    result = CliRunner().invoke(app, ["score", str(tmp_path / "gold.swc"), str(tmp_path / "pred.swc")])
    one_line_exit_2(result, "gold.swc", "no nodes")


def test_synth_builds_on_no_other_runs_folder(tmp_path: Path) -> None:
    small = ["--shape", "16,32,32"]
    out = tmp_path / "synth"
    assert CliRunner().invoke(app, ["synth", "tiny", "--out", str(out), "--n", "2", *small]).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = CliRunner().invoke(app, ["synth", "tiny", "--out", str(out), "--n", "1", "--seed", "3", *small])
    one_line_exit_2(again, "another synth run", "--seed 3 (the folder's: 0)", "--n 1 (the folder's: 2)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert len(json.loads((out / "manifest.json").read_text())["volumes"]) == 2
    assert CliRunner().invoke(app, ["synth", "tiny", "--out", str(out), "--n", "2", *small]).exit_code == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    write_volume(mine / "stack.tif", np.zeros((2, 4, 4), np.uint8))
    one_line_exit_2(CliRunner().invoke(app, ["synth", "tiny", "--out", str(mine), *small]), "stack.tif")
    assert [p.name for p in mine.iterdir()] == ["stack.tif"]


def test_train_judge_passes_the_root_and_the_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge for runs told the soma, at a preset's join reach: both reach the training, and a bad root is one
    line before any work."""
    from neurorefiner.adaptation.judge import training

    seen = {}

    def fake(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(kwargs)
        return tmp_path / "j.json", tmp_path / "j.md"

    monkeypatch.setattr(training, "train_judge", fake)
    result = CliRunner().invoke(app, ["train-judge", "--dataset", "tiny", "--split", "val", "--tree-root", "gold",
                                      "--reach-um", "16", "--out", str(tmp_path / "j.json")])
    assert result.exit_code == 0, result.output
    assert seen["tree_root"] == "gold" and seen["reach_um"] == 16.0
    monkeypatch.undo()
    one_line_exit_2(CliRunner().invoke(app, ["train-judge", "--dataset", "tiny", "--split", "val", "--tree-root",
                                             "soma", "--out", str(tmp_path / "k.json")]), "--tree-root soma")
    assert not (tmp_path / "k.json").exists()
