"""neurorefiner.studies.prior_compare (`neurorefiner study prior-compare`): each network's plain and prior runs side by
side, read from the cards and val choices the runs wrote; the val traces are those of the chosen setting, not of
another row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import neurorefiner.studies.prior_compare as pc
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import write_rows_csv

PRESET = "synthetic_cwmbs_weak"


def _card(dice: float) -> str:
    return ("# x\n\n- post-processing recorded for inference: {'threshold': 0.4, 'dust_voxels': 0, "
            "'keep_largest': 1, 'bridge_um': 3.0}, chosen on x val split\n"
            f"- validation (sliding window, threshold 0.5): Dice 0.1, clDice 0.2500; best validation Dice {dice:.4f}\n")


def _write_run(tables: Path, stem: str, dice: float, chosen: dict, val_rows: list[tuple]) -> None:
    (tables / f"{PRESET}_{stem}_card.md").write_text(_card(dice))
    (tables / f"{PRESET}_{stem}_postprocess_val.json").write_text(json.dumps(chosen))
    columns = ["case", "threshold", "bridge_um", "PRE", "REC", "F1", "SD", "SSD"]
    write_rows_csv(tables / f"{PRESET}_{stem}_postprocess_val.csv", [dict(zip(columns, r)) for r in val_rows], columns)


def test_pairs_read_the_chosen_setting(tmp_path: Path) -> None:
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    rows_plain = [("v0", 0.4, 3.0, 1, 1, 0.6, 1, 10.0), ("v1", 0.4, 3.0, 1, 1, 0.4, 1, 20.0),
                  ("v0", 0.4, 0.0, 1, 1, 0.9, 1, 1.0), ("v0", 0.5, 3.0, 1, 1, 0.9, 1, 1.0)]
    _write_run(tmp_path, "vnet", 0.30, post, rows_plain)
    _write_run(tmp_path, "vnet_prior", 0.45, {**post, "bridge_um": 0.0},
               [("v0", 0.4, 0.0, 1, 1, 0.7, 1, 5.0), ("v0", 0.4, 3.0, 1, 1, 0.1, 1, 50.0)])
    _write_run(tmp_path, "unetr", 0.2, post, rows_plain)  # no prior run: not paired
    rows = pc.compare(PRESET, tmp_path)
    pairs = pc.paired(rows)
    assert [(a["network"], b["prior"]) for a, b in pairs] == [("vnet", True)]
    plain, prior = pairs[0]
    assert plain["val_F1"] == pytest.approx(0.5) and plain["val_SSD"] == pytest.approx(15.0)
    assert prior["val_F1"] == pytest.approx(0.7) and prior["val_post"] == "thr 0.4"
    assert plain["best_val_dice"] == pytest.approx(0.30) and plain["val_cldice"] == pytest.approx(0.25)
    assert plain["test_F1"] is None  # no test table written
    text = pc.markdown(PRESET, rows)
    assert "| vnet | 0 | 0.300 | 0.450 | +0.150 | 0.500 | 0.700 | +0.200 |" in text
    assert "raises best val Dice for 1 of 1" in text


def test_card_without_validation_line_is_a_clear_error(tmp_path: Path) -> None:
    card = tmp_path / "card.md"
    card.write_text("# x\n- validation: none (every dev case trained the network)\n")
    with pytest.raises(InputError, match="no validation line"):
        pc.card_validation(card)


def test_chosen_setting_missing_from_val_rows_is_a_clear_error(tmp_path: Path) -> None:
    post = {"threshold": 0.9, "bridge_um": 0.0}
    _write_run(tmp_path, "vnet", 0.3, post, [("v0", 0.4, 3.0, 1, 1, 0.6, 1, 10.0)])
    with pytest.raises(InputError, match="no val row for the chosen setting"):
        pc.val_choice(tmp_path / f"{PRESET}_vnet_postprocess_val.json", tmp_path / f"{PRESET}_vnet_postprocess_val.csv")


def test_other_seeds_pair_within_their_seed_and_never_take_test_rows(tmp_path: Path) -> None:
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    val = [("v0", 0.4, 3.0, 1, 1, 0.5, 1, 10.0)]
    _write_run(tmp_path, "vnet", 0.30, post, val)
    _write_run(tmp_path, "vnet_prior", 0.40, post, val)
    _write_run(tmp_path, "vnet_seed1", 0.10, post, val)
    _write_run(tmp_path, "vnet_seed1_prior", 0.60, post, val)
    _write_run(tmp_path, "unetr_seed1_prior", 0.60, post, val)  # its plain seed-1 run is missing: not paired
    assert [r["seed"] for r in pc.compare(PRESET, tmp_path)] == [0, 0]  # default: the recipe's seed only
    rows = pc.compare(PRESET, tmp_path, seeds=(0, 1))
    pairs = pc.paired(rows)
    assert [(a["network"], a["seed"], b["best_val_dice"]) for a, b in pairs] == [("vnet", 0, 0.4), ("vnet", 1, 0.6)]
    text = pc.markdown(PRESET, rows)
    assert "| vnet | 1 | 0.100 | 0.600 | +0.500 |" in text
    assert "Pairs (network and seed) with both runs: 2, networks: 1" in text
    pc.plot(PRESET, rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_command_writes_its_files_and_refuses_an_unknown_preset(tmp_path: Path) -> None:
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    val = [("v0", 0.4, 3.0, 1, 1, 0.5, 1, 10.0)]
    _write_run(tmp_path, "vnet", 0.30, post, val)
    _write_run(tmp_path, "vnet_prior", 0.40, post, val)
    runner = CliRunner()
    done = runner.invoke(app, ["study", "prior-compare", "--preset", PRESET, "--tables", str(tmp_path), "--out",
                               str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    text = (tmp_path / "out" / f"prior_compare_{PRESET}.md").read_text()
    assert f"`neurorefiner study prior-compare --preset {PRESET} --seed 0`" in text
    assert (tmp_path / "out" / f"prior_compare_{PRESET}.csv").exists()
    done = runner.invoke(app, ["study", "prior-compare", "--preset", "diadem", "--tables", str(tmp_path), "--out",
                               str(tmp_path)])
    assert done.exit_code == 2 and "--preset must be one of" in done.output
