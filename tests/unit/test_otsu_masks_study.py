"""The otsu-masks study: its tables from rows, and its refusal of a test split (it chooses settings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurorefiner.errors import InputError
from neurorefiner.studies.otsu_masks import LOOPS, joins_table, otsu_masks, stack_table


def _row(case: str, method: str, judge: str, check: str, f1: float) -> dict:
    return {"case": case, "segmenter": "otsu", "method": method, "judge": judge, "piece_check": check,
            "PRE": 90.0, "REC": 80.0, "F1": f1, "dF1": f1 - 50.0}


def test_the_stack_table_has_one_line_per_stack_and_the_means() -> None:
    rows = [_row("OP_1", "initial", "-", "-", 50.0)] + [_row("OP_1", "neurorefiner", j, c, 60.0) for j, c in LOOPS]
    rows += [_row("OP_2", "initial", "-", "-", 40.0)]
    lines = stack_table(rows).splitlines()
    assert len(lines) == 2 + 2 + 1
    assert lines[2].startswith("| OP_1 | 50.00 (90.00 / 80.00) | 60.00 (90.00 / 80.00) +10.00")
    assert lines[-1] == "| mean F1 | 45.00 | 60.00 | 60.00 | 60.00 | 60.00 |"


def test_the_joins_table_lists_every_join() -> None:
    join = {"segmenter": "otsu", "case": "OP_2", "round": 1, "piece_voxels": 4935, "tree_voxels": 15678,
            "gap_um": 1.78, "signal_ratio": 0.555, "noise_p": 0.001, "on_gold": 0.0, "in_scope": 0.78,
            "check": "refuses", "dF1": 0.0, "dPRE": 0.0}
    lines = joins_table([join]).splitlines()
    assert len(lines) == 3 and "| refuses |" in lines[2]


def test_a_test_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="dev / val"):
        otsu_masks("diadem", "test", tmp_path, ["unet3d"], ["otsu"])
    assert not any(tmp_path.iterdir())


def test_the_loop_is_told_the_soma(monkeypatch: pytest.MonkeyPatch) -> None:
    """The study's loops grow the piece at the gold's root, as the tables' runs do (evaluate.py tree_root=gold);
    they grew the largest piece before, which on an Otsu mask may be a bright fibre of another cell."""
    from types import SimpleNamespace

    import numpy as np

    from neurorefiner.adaptation.judge.training import GoldCase
    from neurorefiner.io.swc import Tree
    from neurorefiner.refine.run import RefineRun
    from neurorefiner.studies import otsu_masks as study

    told = {}

    def fake_run(self, image, mask, trace_path=None, root=None, **_):  # type: ignore[no-untyped-def]
        told["root"] = root
        Path(trace_path).write_text("")
        return SimpleNamespace(mask=mask, counts={"accepted": 0})

    monkeypatch.setattr(RefineRun, "run", fake_run)
    gold = Tree.from_points(np.array([[3.0, 4.0, 5.0], [3.0, 4.0, 9.0]]), np.array([-1, 0]))
    image = np.zeros((8, 16, 16), np.float32)
    gc = GoldCase("OP_1", "otsu", image, image > 0, gold, (1.0, 1.0, 1.0))
    study.refine(gc, judge=None)
    assert told["root"] == (3.0, 4.0, 5.0)
