"""The stand-ins' calibration table is built from evaluate.py rows, labelled SYNTHETIC, and refuses an empty
rows folder with one clear line. (The stand-ins' cards: test_segmenter_cards.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neurorefiner.errors import InputError
from neurorefiner.studies.standins import standins_table


def _row(folder: Path, case: str, protocol: str, f1: float, segmenter: str = "unet3d") -> None:
    path = folder / "rows" / "abc" / "test" / segmenter / f"initial-{protocol}-{case}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"case": case, "protocol": protocol, "PRE": 1.0, "REC": f1, "F1": f1, "SD": 2.0,
                                "SSD": 3.0}))


def test_rows_become_the_table_beside_the_paper(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    _row(rows / "synthetic_cwmbs_weak_unet3d", "synthetic_cwmbs_weak_test_000", "root_seeded", 0.5)
    _row(rows / "synthetic_cwmbs_weak_unet3d", "synthetic_cwmbs_weak_test_001", "root_seeded", 0.7)
    md = standins_table(rows, tmp_path / "out")
    line = next(x for x in md.splitlines() if x.startswith("| synthetic_cwmbs_weak"))
    assert "SYNTHETIC" in md and "| 2 of 8 (000 001) |" in line and "| 60.00 |" in line and "| -14.94 |" in line
    assert (tmp_path / "out" / "standins.csv").exists()


def test_no_rows_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no stand-in rows"):
        standins_table(tmp_path / "nothing", tmp_path / "out")


def test_an_empty_trace_does_not_make_the_mean_distance_infinite(tmp_path: Path) -> None:
    rows = tmp_path / "rows" / "synthetic_cwmbs_weak_unet3d"
    _row(rows, "synthetic_cwmbs_weak_test_000", "root_seeded", 0.5)
    _row(rows, "synthetic_cwmbs_weak_test_001", "root_seeded", 0.0)
    path = next(rows.glob("rows/*/test/unet3d/*test_001.json"))
    path.write_text(json.dumps({**json.loads(path.read_text()), "SD": float("inf"), "SSD": float("inf")}))
    md = standins_table(tmp_path / "rows", tmp_path / "out")
    line = next(x for x in md.splitlines() if x.startswith("| synthetic_cwmbs_weak"))
    assert "inf" not in line and "| 2.00 | 3.00 |" in line and "| 25.00 |" in line


def test_fresh_rows_are_not_called_the_test_split(tmp_path: Path) -> None:
    """run.sh step fresh scores volumes of an unused seed; the table must not say "test split"."""
    rows = tmp_path / "rows" / "synthetic_cwmbs_weak_unet3d"
    _row(rows, "synthetic_cwmbs_weak_test_000", "root_seeded", 0.5)
    md = standins_table(tmp_path / "rows", tmp_path / "out", fresh_seed=2027)
    assert "fresh volumes, seed 2027" in md.splitlines()[0] and "dataset seed 2027" in md
    assert "of the test split" not in md and "(step `fresh`)" in md
    line = next(x for x in md.splitlines() if x.startswith("| synthetic_cwmbs_weak"))
    assert "| 1 (000) |" in line  # fresh volumes are drawn as many as scored: never "8 of 4"
    assert "of the test split" in standins_table(tmp_path / "rows", tmp_path / "out2")


def test_nnunet_style_rows_get_their_own_line(tmp_path: Path) -> None:
    """run.sh ARCHS=nnunet_style writes rows/<preset>_nnunet_style: the table shows them beside the U-Net's."""
    rows = tmp_path / "rows"
    _row(rows / "synthetic_bigneuron_unet3d", "synthetic_bigneuron_test_000", "root_seeded", 0.5)
    _row(rows / "synthetic_bigneuron_nnunet_style", "synthetic_bigneuron_test_000", "root_seeded", 0.8,
         segmenter="nnunet_style")
    lines = [x for x in standins_table(rows, tmp_path / "out").splitlines() if x.startswith("| synthetic_bigneuron")]
    assert len(lines) == 2 and "nnU-Net-style" in lines[1] and "| 80.00 |" in lines[1]
