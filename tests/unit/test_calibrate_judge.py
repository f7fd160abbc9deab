"""A judge's thresholds set on a lab's own traced stacks (``neurorefiner calibrate-judge``): the rule, the kinds
it leaves alone, and the command on a real DIADEM dev stack (a defect-cut copy of its gold mask stands in for the
lab's segmentation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from neurorefiner.adaptation.judge.calibration import MIN_LABELLED, calibrate, calibrated_threshold
from neurorefiner.agents.learned.judge import Judge
from neurorefiner.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
OP_1 = ROOT / "data" / "diadem_op" / "OP_1"


def _judge() -> Judge:
    return Judge({"join": object(), "remove": object()}, {"join": 0.9, "remove": 0.95, "prune": 1.1},
                 meta={"dataset": "elsewhere"})


def test_a_shifted_ranking_gets_the_threshold_its_labels_support() -> None:
    rng = np.random.default_rng(0)
    y = (rng.random(40) < 0.5).astype(int)
    p = np.where(y == 1, 0.30 + 0.1 * rng.random(40), 0.1 * rng.random(40))  # right: 0.30-0.40, wrong: under 0.1
    calibrated, (row,) = calibrate(_judge(), {"join": (p, y)}, ["join"])
    assert row.before == 0.9 and row.precision_before != row.precision_before  # nothing admitted at 0.9
    assert row.after <= p[y == 1].min()  # every right join admitted ...
    assert row.recall_after == 1.0 and row.precision_after >= 0.9  # ... at the floor (0.8) plus the margin
    assert calibrated.thresholds["join"] == row.after and calibrated.thresholds["remove"] == 0.95
    assert calibrated.meta["calibrated"]["kinds"]["join"]["after"] == row.after
    assert calibrated.meta["dataset"] == "elsewhere"
    assert _judge().thresholds["join"] == 0.9  # the start is untouched


def test_kinds_with_too_few_labels_one_class_or_no_model_keep_their_threshold() -> None:
    few = (np.linspace(0, 1, MIN_LABELLED - 1), np.arange(MIN_LABELLED - 1) % 2)
    one_class = (np.linspace(0, 1, 30), np.ones(30, int))
    calibrated, rows = calibrate(_judge(), {"join": few, "remove": one_class}, ["join", "remove", "prune"])
    assert [r.after for r in rows] == [0.9, 0.95, 1.1]
    assert "fewer than" in rows[0].kept and "all 30" in rows[1].kept and "no model" in rows[2].kept
    assert calibrated.thresholds == _judge().thresholds


def test_a_kind_whose_labels_never_reach_the_floor_is_silenced() -> None:
    y = np.array([1, 0] * 15)
    p = np.linspace(0, 1, 30)  # alternating labels: no threshold admits 90 % right
    assert calibrated_threshold(p, y, 0.8) == 1.1
    calibrated, (row,) = calibrate(_judge(), {"join": (p, y)}, ["join"])
    assert row.after == 1.1 and calibrated.thresholds["join"] == 1.1


@pytest.mark.slow
def test_the_command_sets_thresholds_on_a_traced_real_stack(tmp_path: Path) -> None:
    from neurorefiner.defects.damage import cut_and_speckle
    from neurorefiner.io import read_swc
    from neurorefiner.io.stacks import write_volume

    gold = read_swc(OP_1.with_suffix(".swc"))
    spacing = (1.0, 0.33, 0.33)
    import tifffile

    shape = tifffile.imread(OP_1.with_suffix(".tif")).shape
    mask = cut_and_speckle(gold.rasterize(shape, spacing, radius=1.5, strict=False), np.random.default_rng(0), 30, 20)
    write_volume(tmp_path / "mask.tif", mask.astype(np.uint8))
    stack = f"{OP_1.with_suffix('.tif')},{tmp_path / 'mask.tif'},{OP_1.with_suffix('.swc')}"
    out = tmp_path / "lab" / "judge.json"
    result = CliRunner().invoke(app, ["calibrate-judge", "--stack", stack, "--judge",
                                      str(ROOT / "checkpoints" / "judge.json"), "--kinds", "join,remove",
                                      "--spacing", "1,0.33,0.33", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "join:" in result.output and "remove:" in result.output
    judge = Judge.load(out)
    start = Judge.load(ROOT / "checkpoints" / "judge.json")
    record = judge.meta["calibrated"]["kinds"]
    assert record["join"]["labelled"] > 0 and record["remove"]["labelled"] >= MIN_LABELLED
    assert judge.thresholds["prune"] == start.thresholds["prune"]  # not asked for
    for kind in ("join", "remove"):
        assert judge.thresholds[kind] == record[kind]["after"]
    card = out.with_suffix(".md").read_text()
    assert "calibrate-judge --stack" in card and "| remove |" in card and "OP_1" in card


def test_bad_stacks_are_one_line_and_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "j.json"
    two = runner.invoke(app, ["calibrate-judge", "--stack", "a.tif,b.tif", "--out", str(out)])
    assert two.exit_code == 2 and "IMAGE,MASK,GOLD.swc" in two.output
    missing = runner.invoke(app, ["calibrate-judge", "--stack", f"{tmp_path}/a.tif,{tmp_path}/b.tif,{tmp_path}/g.swc",
                                  "--out", str(out)])
    assert missing.exit_code == 2 and "a.tif" in missing.output and "not found" in missing.output
    kinds = runner.invoke(app, ["calibrate-judge", "--stack", "a,b,c.swc", "--kinds", "joins", "--out", str(out)])
    assert kinds.exit_code == 2 and "--kinds" in kinds.output
    assert not out.exists()


def _stack(tmp_path: Path, mask: np.ndarray, swc: str) -> str:
    from neurorefiner.io.stacks import write_volume

    write_volume(tmp_path / "img.tif", np.full(mask.shape, 20, np.uint8))
    write_volume(tmp_path / "mask.tif", mask.astype(np.uint8))
    (tmp_path / "gold.swc").write_text(swc)
    return f"{tmp_path / 'img.tif'},{tmp_path / 'mask.tif'},{tmp_path / 'gold.swc'}"


@pytest.mark.parametrize("swc", ["", "# a header and no node\n"])
def test_an_empty_gold_tracing_is_one_line_and_exit_2(tmp_path: Path, swc: str) -> None:
    """It used to exit 0 with a judge marked calibrated and its thresholds unchanged, the empty file never named."""
    from tests.unit.test_shard_folder import one_line_exit_2

    mask = np.zeros((8, 16, 16), bool)
    mask[4, 8, 2:14] = True
    result = CliRunner().invoke(app, ["calibrate-judge", "--stack", _stack(tmp_path, mask, swc), "--spacing",
                                      "1,1,1", "--out", str(tmp_path / "lab" / "judge.json")])
    one_line_exit_2(result, "gold.swc", "no nodes")
    assert not (tmp_path / "lab").exists()


def test_an_empty_mask_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.unit.test_shard_folder import one_line_exit_2

    gold = "1 3 2 8 4 1 -1\n2 3 12 8 4 1 1\n"
    result = CliRunner().invoke(app, ["calibrate-judge", "--stack", _stack(tmp_path, np.zeros((8, 16, 16), bool), gold),
                                      "--spacing", "1,1,1", "--out", str(tmp_path / "lab" / "judge.json")])
    one_line_exit_2(result, "mask.tif", "empty")
    assert not (tmp_path / "lab").exists()
