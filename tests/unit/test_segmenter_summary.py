"""neurorefiner.evaluation.segmenter_summary (`neurorefiner make segmenter-summary`): each network's row is the one its
card's recorded post-processing names, with the Betti-0 excess of its threshold-only masks; a card whose row is
missing is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import neurorefiner.evaluation.segmenter_rows as rows_mod
import neurorefiner.evaluation.segmenter_summary as sm
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError

CARD = ("# vnet on x (SYNTHETIC), 256 steps\n\n- post-processing recorded for inference: {'threshold': 0.4, "
        "'dust_voxels': 0, 'keep_largest': 1, 'bridge_um': 3.0}, chosen on x val split\n"
        "- steps: 256 optimiser steps, 8 epochs\n"
        "- wall time of the last `fit` call: 650 s on CPU, torch threads: 1\n")


def _row(method: str, case: str, f1: float, b0: float = 0.0) -> dict:
    return {"method": method, "case": case, "SD": 1.0, "SSD": 2.0, "pSSD": 0.1, "PRE": f1, "REC": f1, "F1": f1,
            "MES": f1, "Dice": 0.5, "clDice": 0.5, "b0_mask": 1.0, "b0_gold": 1.0, "b0_excess": b0, "seconds": 1.0}


def _source(tmp_path: Path, rows: list[dict]) -> object:
    out = tmp_path / "t"
    rows_mod.write_tables(rows, out, "x_test", "x")
    (tmp_path / "vnet.md").write_text(CARD)
    return sm.Source("x", "x test (SYNTHETIC data)", out / "x_test_cases.csv", {"vnet": tmp_path / "vnet.md",
                                                                                  "unetr": tmp_path / "none.md"})


def test_the_recorded_setting_picks_the_row(tmp_path):
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    own = rows_mod.own_label("vnet", post) + " -> APP2"
    rows = [_row(sm.FLOORS[0], c, 0.1) for c in "ab"]
    rows += [_row(own, "a", 0.6), _row(own, "b", 0.8)]
    rows += [_row("vnet (threshold 0.6, dust 0, keep largest 1) -> APP2", c, 0.0) for c in "ab"]  # another setting
    rows += [_row(rows_mod.raw_label("vnet", post) + " -> APP2", c, 0.0, b0) for c, b0 in (("a", 10), ("b", 30))]
    table = sm.summarise(_source(tmp_path, rows))
    assert [r["segmenter"] for r in table] == [sm.FLOORS[0], "vnet"]  # unetr has no card: no row
    vnet = table[1]
    assert vnet["F1"] == pytest.approx(0.7) and vnet["cases"] == 2
    assert vnet["b0_excess_raw"] == pytest.approx(20.0)
    assert (vnet["steps"], vnet["wall_s"], vnet["post"]) == (256, 650, "thr 0.4, bridge 3 um, largest")
    assert "| vnet | thr 0.4, bridge 3 um, largest | 0.700 |" in sm.markdown([_source(tmp_path, rows)], [table])


def test_a_card_without_its_row_is_an_error(tmp_path):
    rows = [_row("vnet (threshold 0.6, dust 0, keep largest 1) -> APP2", "a", 0.5)]
    with pytest.raises(InputError, match="no row for it"):
        sm.summarise(_source(tmp_path, rows))


def test_a_resumed_training_is_marked_not_passed_off_as_the_whole_time(tmp_path):
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    rows = [_row(rows_mod.own_label("vnet", post) + " -> APP2", "a", 0.6)]
    source = _source(tmp_path, rows)
    assert sm.summarise(source)[0]["resumed"] is False
    (tmp_path / "vnet.md").write_text(CARD.replace("8 epochs\n", "8 epochs (resumed from `last.ckpt`)\n"))
    table = sm.summarise(source)
    assert table[0]["resumed"] is True and table[0]["wall_s"] == 650
    assert "| 256 | 650 (resumed) |" in sm.markdown([source], [table])


POST = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}


def _variant_source(tmp_path: Path, rows: list[dict]) -> object:
    """A table of ``rows`` with cards for vnet and vnet:prior (both recording POST)."""
    out = tmp_path / "t"
    rows_mod.write_tables(rows, out, "x_test", "x")
    (tmp_path / "vnet.md").write_text(CARD)
    (tmp_path / "vnet_prior.md").write_text(CARD)
    return sm.Source("x", "x", out / "x_test_cases.csv", {"vnet": tmp_path / "vnet.md",
                                                           "vnet:prior": tmp_path / "vnet_prior.md"})


def test_a_prior_variant_gets_its_own_row_after_its_network(tmp_path):
    """run_synthetic.sh PRIOR=... writes <preset>_<arch>_prior_card.md and rows labelled <arch>:prior; the
    default sources list that card right after the plain network's."""
    sources = {s.dataset: s for s in sm.default_sources(tmp_path, tmp_path / "shipped")}
    names = list(sources["synthetic_cwmbs_weak"].cards)
    assert names.index("gbpnet_style:prior") == names.index("gbpnet_style") + 1
    assert sources["synthetic_cwmbs_weak"].cards["gbpnet_style:prior"].name == \
        "synthetic_cwmbs_weak_gbpnet_style_prior_card.md"
    rows = [_row(rows_mod.own_label("vnet", POST) + " -> APP2", "a", 0.2),
            _row(rows_mod.own_label("vnet:prior", POST) + " -> APP2", "a", 0.6)]
    table = sm.summarise(_variant_source(tmp_path, rows))
    assert [(r["segmenter"], r["F1"]) for r in table] == [("vnet", 0.2), ("vnet:prior", 0.6)]


def test_a_val_only_card_is_listed_not_an_error_but_a_stale_one_still_is(tmp_path):
    """run_synthetic.sh STEP=card writes a card for a run never scored on test (extra seeds, the prior
    comparison). Its segmenter has no row at all: listed, no row. Rows of that segmenter under
    another post-processing still mean a stale table."""
    rows = [_row(rows_mod.own_label("vnet", POST) + " -> APP2", "a", 0.2)]
    source = _variant_source(tmp_path, rows)
    val_only: list[str] = []
    table = sm.summarise(source, val_only)
    assert [r["segmenter"] for r in table] == ["vnet"] and val_only == ["vnet:prior"]
    text = sm.markdown([source], [table], [val_only])
    assert "val split only, no test rows (the val-split comparison, `prior_compare_<preset>.md`): vnet:prior." in text
    rows.append(_row(rows_mod.own_label("vnet:prior", {**POST, "threshold": 0.6}) + " -> APP2", "a", 0.6))
    rows_mod.write_tables(rows, tmp_path / "t", "x_test", "x")
    with pytest.raises(InputError, match="no row for it"):
        sm.summarise(source, [])


def test_default_sources_read_the_diadem_networks_cards_and_the_shipped_unets(tmp_path):
    diadem = sm.default_sources(tmp_path, tmp_path / "shipped")[0]
    assert diadem.cases_csv == tmp_path / "diadem_test_all_cases.csv"
    assert diadem.cards["vnet"] == tmp_path / "diadem" / "vnet_card.md"
    assert diadem.cards["unet3d"] == tmp_path / "shipped" / "unet3d_diadem_cpu.md"


def test_the_command_writes_the_three_files_and_refuses_an_empty_folder(tmp_path):
    tables = tmp_path / "tables"
    post = {"threshold": 0.4, "dust_voxels": 0, "keep_largest": 1, "bridge_um": 3.0}
    rows = [_row(sm.FLOORS[0], "a", 0.1), _row(rows_mod.own_label("vnet", post) + " -> APP2", "a", 0.6)]
    rows_mod.write_tables(rows, tables / "synthetic", "synthetic_zbfwb_test", "x")
    (tables / "synthetic" / "synthetic_zbfwb_vnet_card.md").write_text(CARD)
    runner = CliRunner()
    done = runner.invoke(app, ["make", "segmenter-summary", "--tables", str(tables), "--shipped", str(tmp_path),
                               "--no-png"])
    assert done.exit_code == 0, done.output
    text = (tables / "summary.md").read_text()
    assert "## synthetic_zbfwb test (SYNTHETIC data)" in text
    assert "| vnet | thr 0.4, bridge 3 um, largest | 0.600 |" in text
    assert (tables / "summary.csv").read_text().count("\n") == 3 and not (tables / "summary.png").exists()
    (tmp_path / "empty").mkdir()
    done = runner.invoke(app, ["make", "segmenter-summary", "--tables", str(tmp_path / "empty")])
    assert done.exit_code == 2 and "no rows table" in done.output
