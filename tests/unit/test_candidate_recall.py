"""Candidate recall: breaks read off the gold tree, and whether the join search offers them."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.io.swc import Tree
from neurorefiner.studies.candidate_recall import case_recall, gold_breaks
from neurorefiner.topology.components import label_components

SPACING = (1.0, 0.5, 0.5)


def tube_with_cuts(cuts: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, Tree]:
    mask = np.zeros((16, 48, 160), bool)
    mask[7:10, 22:27, 4:156] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    for a, b in cuts:
        mask[:, :, a:b] = False
    xs = np.arange(4, 156, 2, dtype=float)
    gold = Tree.from_points(np.stack([np.full_like(xs, 8), np.full_like(xs, 24), xs], axis=1),
                            np.arange(-1, len(xs) - 1))
    return image, mask, gold


def test_gold_breaks_measure_each_gap_along_the_gold() -> None:
    image, mask, gold = tube_with_cuts([(40, 52), (100, 140)])   # 6 um and 20 um cuts (x voxels of 0.5 um)
    labels, _ = label_components(mask)
    gaps = sorted(gold_breaks(labels, gold, SPACING, tol_um=1.0).values())
    assert len(gaps) == 2
    assert 4.0 <= gaps[0] <= 8.0 and 17.0 <= gaps[1] <= 23.0


def test_the_default_search_covers_the_break_within_reach_and_a_wider_one_is_not_within_reach() -> None:
    image, mask, gold = tube_with_cuts([(40, 52), (100, 140)])
    row = case_recall(image, mask, gold, SPACING, searches={"default": {}})
    assert row["breaks"] == 1 and row["default: covered"] == 1


def test_the_shadow_validator_keeps_every_edit_and_reads_each_against_gold() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_learned_agents import DecodingEditor, always, cut_tube, gold_along_tube

    from neurorefiner.adaptation.judge.gold_labels import GoldIndex
    from neurorefiner.agents.learned import LearnedAdvisor, LearnedInspector
    from neurorefiner.agents.loop import Agents, LoopSettings, run_loop
    from neurorefiner.agents.roles import CallInfo, Verdict
    from neurorefiner.studies.validator_audit import ShadowValidator, reason_class

    image, mask = cut_tube(12)
    class Rejecting:
        def validate(self, *args):  # type: ignore[no-untyped-def]
            return Verdict(False, "not compliant: only 12% of the change is at the named place", CallInfo("test"))

    rejecting = Rejecting()
    shadow = ShadowValidator(rejecting, GoldIndex(gold_along_tube(), SPACING, mask.shape))
    agents = Agents(LearnedInspector(judge=always({"join": 0.9, "remove": 0.1, "prune": 0.1})), LearnedAdvisor(),
                    shadow)
    result = run_loop(image, mask, agents, DecodingEditor(), LoopSettings(t_max=3, editor_size=(16, 32, 32)),
                      SPACING)
    assert result.counts["accepted"] == 1 and len(shadow.records) == 1
    r = shadow.records[0]
    assert not r["accept"] and r["right"] and r["op"] in ("connect", "repair")
    assert reason_class(r["reason"]) == "not compliant: only # of the change is at the named place"


def test_validator_settings_from_the_command_line_are_numbers_and_a_wrong_name_is_refused() -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.studies.validator_audit import parse_settings

    assert parse_settings("min_inside=0.8, connect_margin=12") == {"min_inside": 0.8, "connect_margin": 12}
    assert parse_settings("") == {}
    with pytest.raises(InputError, match="min_insde"):
        parse_settings("min_insde=0.8")
    with pytest.raises(InputError, match="key=number"):
        parse_settings("margin=wide")


def test_breaks_are_counted_as_touching_the_tree_in_a_chain_or_detached() -> None:
    from neurorefiner.studies.candidate_recall import gaps_from_tree

    breaks = {(1, 2): 0.5, (2, 3): 1.0, (3, 4): 2.0, (5, 6): 1.0}   # tree 1 -> 2 -> 3 -> 4; 5 - 6 elsewhere
    assert gaps_from_tree(breaks, 1) == {(1, 2): 1, (2, 3): 2, (3, 4): 3, (5, 6): None}
