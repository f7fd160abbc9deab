"""Table 5 with the learned Inspector: which candidates each set of inputs shows (``agents.learned.visibility``).
A break whose far piece crosses the tree somewhere else in depth is hidden in the whole-volume MIP and seen in
the block MIPs; a speck under the tree's projection is seen only with Betti-0."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents.candidates import Candidate
from neurorefiner.agents.learned.visibility import ALL_INPUTS, visible
from neurorefiner.agents.loop import INSPECTOR_INPUTS
from neurorefiner.topology.blocks import grid_blocks


def _scene() -> tuple[np.ndarray, list[Candidate]]:
    labels = np.zeros((8, 40, 40), np.int32)
    labels[1, 5, 0:20] = 1                       # the tree, ending at x = 19
    labels[1, 5, 23:40] = 2                      # past a 3-voxel gap, the far piece ...
    labels[1, 5:11, 35] = 2                      # ... turns ...
    labels[1:7, 10, 35] = 2                      # ... rises in depth ...
    labels[6, 10, 10:36] = 2
    labels[6, 0:11, 10] = 2                      # ... and crosses over the tree at (y 5, x 10), 5 slices deeper
    labels[3, 30, 5] = 3                         # a speck in the open
    labels[7, 5, 5] = 4                          # a speck right under the tree's projection
    none = np.zeros((0, 3))
    cands = [Candidate("join", ((1, 5, 19), (1, 5, 23)), (1, 2), {}, none),
             Candidate("remove", ((3, 30, 5),), (3,), {}, none),
             Candidate("remove", ((7, 5, 5),), (4,), {}, none),
             Candidate("prune", ((1, 5, 0), (1, 5, 3)), (1,), {}, none)]
    return labels, cands


@pytest.mark.parametrize(("inputs", "want"), [
    (("global_mip",), [False, True, False, True]),
    (("global_mip", "block_mips"), [True, True, False, True]),
    (("global_mip", "betti0"), [True, True, True, True]),
    (ALL_INPUTS, [True, True, True, True]),
])
def test_each_input_shows_what_it_can(inputs: tuple[str, ...], want: list[bool]) -> None:
    labels, cands = _scene()
    blocks = grid_blocks(labels.shape, 20)
    assert visible(cands, labels, blocks, inputs).tolist() == want


def test_the_inputs_are_the_loops_and_an_unknown_one_is_named() -> None:
    assert ALL_INPUTS == INSPECTOR_INPUTS
    labels, cands = _scene()
    with pytest.raises(ValueError, match="betti1"):
        visible(cands, labels, [], ("betti1",))


def test_the_learned_inspector_judges_only_what_its_inputs_show() -> None:
    from neurorefiner.agents.learned.roles import LearnedInspector
    from neurorefiner.agents.roles import GlobalView

    labels, _ = _scene()
    mask = labels > 0
    image = np.where(mask, 1.0, 0.05).astype(np.float32)
    image[1, 5, 20:23] = 0.9                      # the gap is bright: the judge would join it
    blocks = grid_blocks(mask.shape, 20)

    class JoinEverything:
        uses_crops = False

        def decide(self, cands, view=None):  # type: ignore[no-untyped-def]
            return np.ones(len(cands)), np.array([c.kind == "join" for c in cands])

    inspector = LearnedInspector(prune=False, join_signal_min=-1.0)
    inspector.judge = JoinEverything()  # type: ignore[assignment]
    full = inspector.inspect(GlobalView(0, image, mask, blocks))
    mip_only = inspector.inspect(GlobalView(0, image, mask, blocks, inputs=("global_mip",)))
    assert any(d.kind == "FN" for f in full.flags.values() for d in f.defects)
    assert not any(d.kind == "FN" for f in mip_only.flags.values() for d in f.defects)
