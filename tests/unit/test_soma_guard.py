"""The soma's piece is never cut away when the soma is known: the loop refuses an accepted edit that deletes
the voxel at the soma, removes the soma's piece as noise, or splits it; other edits pass unchanged.

The case behind it: on a SYNTHETIC bigneuron volume (nnU-Net-style mask) the learned Validator accepted the cut
of an "attached branch" that was the soma's own end of the tree (729 of its 1,304 voxels, the seed among them),
and the root-seeded reconstruction came out empty."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.loop import Agents, LoopSettings, run_loop
from neurorefiner.agents.soma_guard import RegionSoma, SomaPiece
from tests.unit.test_agent_loop import RegionEditor, ScriptedAdvisor, ScriptedInspector, ScriptedValidator


def tree_with_soma_end() -> tuple[np.ndarray, np.ndarray, tuple[float, float, float]]:
    """A fibre along x whose left end (the soma) lies in the top-left-front cells, and a loose speck far away."""
    mask = np.zeros((32, 64, 64), bool)
    mask[4:7, 8:11, 2:62] = True          # the neuron, its soma end at x = 2..20
    mask[26:28, 50:52, 50:52] = True      # a speck in the bottom-right-rear cells
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    return image, mask, (5.0, 9.0, 3.0)


def run_one_edit(kind: str, line: str, root: tuple[float, float, float] | None) -> np.ndarray:
    image, mask, _ = tree_with_soma_end()
    agents = Agents(ScriptedInspector([{0: kind}]), ScriptedAdvisor([line]), ScriptedValidator([True]))
    return run_loop(image, mask, agents, RegionEditor(), LoopSettings(block_size=64, t_max=1), root=root).mask


def test_an_accepted_removal_of_the_soma_end_is_refused_when_the_soma_is_known() -> None:
    _, mask, root = tree_with_soma_end()
    kept = run_one_edit("FP_ATTACHED", "Remove noise at top-left-front", root)
    assert (kept == mask).all()
    assert kept[5, 9, 3]


def test_without_a_soma_the_loop_keeps_what_the_validator_accepts() -> None:
    _, mask, _ = tree_with_soma_end()
    cut = run_one_edit("FP_ATTACHED", "Remove noise at top-left-front", None)
    assert not cut[5, 9, 3] and cut[5, 9, 40]


def test_noise_removal_elsewhere_still_goes_through() -> None:
    _, mask, root = tree_with_soma_end()
    out = run_one_edit("FP", "Remove isolated noise at bottom-right-rear", root)
    assert not out[26:28, 50:52, 50:52].any()
    assert (out[4:7, 8:11, 2:62]).all()


WHOLE = (slice(0, 32), slice(0, 64), slice(0, 64))   # an edit whose window is the whole region


def region_soma(mask: np.ndarray, root: tuple[float, float, float]) -> RegionSoma:
    soma = SomaPiece.of(mask, root, (1.0, 1.0, 1.0))
    assert soma is not None
    region = soma.in_region(WHOLE)
    assert region is not None
    return region


def test_a_noise_removal_may_not_touch_the_somas_piece() -> None:
    _, mask, root = tree_with_soma_end()
    after = mask.copy()
    after[4:7, 8:11, 58:62] = False       # the far tip of the tree, away from the soma
    why = region_soma(mask, root).refusal("FP", mask, WHOLE, after)
    assert why is not None and "noise removal" in why


def test_a_cut_that_splits_the_somas_piece_is_refused_and_a_tip_cut_is_not() -> None:
    _, mask, root = tree_with_soma_end()
    soma = region_soma(mask, root)
    split = mask.copy()
    split[4:7, 8:11, 30:33] = False
    assert "splits" in (soma.refusal("FP_ATTACHED", mask, WHOLE, split) or "")
    tip = mask.copy()
    tip[4:7, 8:11, 50:62] = False
    assert soma.refusal("FP_ATTACHED", mask, WHOLE, tip) is None


def test_the_soma_misses_a_region_without_its_piece() -> None:
    _, mask, root = tree_with_soma_end()
    soma = SomaPiece.of(mask, root, (1.0, 1.0, 1.0))
    assert soma is not None and soma.seed == (5, 9, 3)
    assert soma.in_region((slice(20, 32), slice(40, 64), slice(40, 64))) is None
    outside = soma.in_region((slice(0, 32), slice(0, 64), slice(32, 64)))
    assert outside is not None and outside.seed is None
    assert SomaPiece.of(mask, None, (1.0, 1.0, 1.0)) is None
    assert SomaPiece.of(np.zeros_like(mask), root, (1.0, 1.0, 1.0)) is None


def test_the_rule_reads_the_edit_in_its_window() -> None:
    _, mask, root = tree_with_soma_end()
    soma = region_soma(mask, root)
    near = (slice(0, 32), slice(0, 64), slice(0, 21))
    cleared = mask[near].copy()
    cleared[4:7, 8:11, 2:21] = False
    assert "soma" in (soma.refusal("FP_ATTACHED", mask, near, cleared) or "")
    far = (slice(0, 32), slice(0, 64), slice(40, 64))
    tip = mask[far].copy()
    tip[4:7, 8:11, 10:22] = False           # x = 50..61 of the volume: the far tip
    assert soma.refusal("FP_ATTACHED", mask, far, tip) is None
    assert "noise removal" in (soma.refusal("FP", mask, far, tip) or "")
