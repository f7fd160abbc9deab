"""The declined-retries study: counting declines and the edits retries got past them; the soma tree's gain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from neurorefiner.studies.declined_retries import retry_counts, soma_tree, tree_gain


def _rec(role: str, rnd: int, block: int, defect: int, **kw) -> str:  # type: ignore[no-untyped-def]
    return json.dumps({"type": "decision", "role": role, "round": rnd, "block": block, "defect": defect, **kw})


def test_an_edit_accepted_after_a_decline_of_its_defect_is_counted_once_per_acceptance(tmp_path: Path) -> None:
    lines = [json.dumps({"type": "run"}),
             _rec("editor", 0, 1, 0, raw="left unchanged: the best bridge is over the limits (darkness 0.9 > 0.6)"),
             _rec("validator", 0, 1, 0, decision={"accept": False}),
             _rec("editor", 0, 1, 0, raw="joined 1 gap(s)", decision={"declined": False}),
             _rec("validator", 0, 1, 0, decision={"accept": True}),
             # another defect: accepted at once, never declined
             _rec("editor", 0, 1, 1, raw="joined 1 gap(s)"),
             _rec("validator", 0, 1, 1, decision={"accept": True}),
             # the record's own flag wins over the words
             _rec("editor", 1, 2, 0, raw="joined", decision={"declined": True}),
             _rec("validator", 1, 2, 0, decision={"accept": False})]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    c = retry_counts(trace)
    assert (c.editor_calls, c.declined_calls, c.declined_defects, c.accepted_after_decline) == (4, 2, 2, 1)


def test_tree_gain_finds_the_piece_one_soma_tree_attached_and_measures_it_against_the_gold() -> None:
    b = np.zeros((8, 32, 32), bool)
    b[4, 4, 2:12] = True                   # the neuron at the root
    b[4, 20, 14:30] = True                 # another fibre, apart in B
    a = b.copy()
    a[4, 4, 12] = True
    a[4, 4:21, 13] = True                  # A joins it to the soma's tree
    gold = np.array([[4, 4, x] for x in range(2, 12)], float)
    root = (4.0, 4.0, 2.0)
    assert soma_tree(a, root, (1.0, 1.0, 1.0))[4, 20, 20] and not soma_tree(b, root, (1.0, 1.0, 1.0))[4, 20, 20]
    pieces = tree_gain(a, b, root, gold)
    assert pieces[0].voxels == 16 + 17 + 1 and pieces[0].near_gold_share < 0.2
    assert tree_gain(b, b, root, gold) == []
