"""The instruction-following probe's perturbations and figures (neurorefiner.studies.instruction_following)."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.studies import instruction_following as ev
from neurorefiner.topology.instructions import Instruction, all_instructions


@pytest.mark.parametrize("ins", list(all_instructions())[::151])
def test_wrong_location_names_another_region(ins):
    wrong = ev.wrong_location(ins)
    assert wrong.op == ins.op and wrong != ins and (wrong.end is None) == (ins.end is None)
    shape = (9, 9, 9)
    assert not np.array_equal(wrong.region(shape), ins.region(shape))
    if ins.end is None:
        assert not (wrong.region(shape) & ins.region(shape)).any()
    else:  # no other two-position instruction of this operation overlaps the true region less
        r = ins.region(shape)
        ov = (wrong.region(shape) & r).sum() / wrong.region(shape).sum()
        assert all((c.region(shape) & r).sum() / c.region(shape).sum() >= ov - 1e-9
                   for c in all_instructions() if c.op == ins.op and c.end is not None and c != ins)


def test_opposite_operation():
    assert ev.opposite_operation(Instruction("repair", "top-left-rear")).format() == \
        "Remove isolated noise at top-left-rear"
    assert ev.opposite_operation(Instruction("remove", "top-left-rear")).op == "repair"
    assert ev.opposite_operation(Instruction("connect", "top-left-rear", "bottom-left-front")).format() == \
        "Remove noise from top-left-rear to bottom-left-front"
    assert ev.opposite_operation(Instruction("remove", "top-left-rear", "bottom-left-front")).op == "connect"


def test_edit_figures():
    gold = np.zeros((4, 6, 6), bool)
    gold[2, 3, :] = True
    mask = gold.copy()
    mask[2, 3, 1:3] = False  # the defect: two voxels
    region = np.zeros_like(gold)
    region[:, :, :3] = True
    f = ev.edit_figures(gold.copy(), mask, gold, region, region)
    assert f["adherence"] == 1.0 and f["fixed"] == 1.0 and f["dice_defect"] == 1.0 and f["changed"] == 2
    f0 = ev.edit_figures(mask, mask, gold, region, region)
    assert np.isnan(f0["adherence"]) and f0["fixed"] == 0.0 and f0["betti0_err"] == 1


def test_by_operation_splits_the_fixed_share(tmp_path):
    rows = ["model,sample,op,condition,fixed",
            "m,0,repair,input (no edit),0.0", "m,0,repair,correct,0.2", "m,1,repair,correct,0.4",
            "m,2,remove,correct,1.0", "m,2,remove,wrong location,0.0"]
    (tmp_path / "rows.csv").write_text("\n".join(rows) + "\n")
    ev.write_by_operation(tmp_path)
    table = (tmp_path / "by_operation.md").read_text()
    assert "| m | correct | - | 0.300 (2) | 1.000 (1) |" in table
    assert "| m | wrong location | - | - | 0.000 (1) |" in table
    assert "input (no edit)" not in table


def test_summary_table_has_every_condition_per_model():
    rows = [{"model": "m", "sample": 0, "op": "repair", "condition": c, "adherence": a, "fixed": f,
             "dice_defect": 0.5, "betti0_err": 1, "changed": ch}
            for c, a, f, ch in [("input (no edit)", float("nan"), 0.0, 0), ("correct", 1.0, 1.0, 2),
                                ("wrong location", float("nan"), 0.0, 0), ("opposite operation", 0.5, 0.0, 4)]]
    table = ev.summary_markdown(rows, ["m"], n=1, stage=1)
    assert "| m | correct | 1.000 (1) | 1.000 | 0.500 | 1.00 | 2 |" in table
    assert "| m | wrong location | nan | 0.000 |" in table
    assert "| m | input (no edit) | - |" in table
