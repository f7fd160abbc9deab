"""A block's isolated noise is removed in few edits, not one editor call per speck."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.learned.advisor import LearnedAdvisor
from neurorefiner.agents.learned.noise_groups import group_noise
from neurorefiner.agents.roles import BlockContext, Defect
from neurorefiner.topology.blocks import grid_blocks


def _speck(z: int, y: int, x: int) -> Defect:
    return Defect("FP", ((z, y, x),), 8, "remove p=0.99")


def test_specks_within_half_a_frame_become_one_removal_and_joins_keep_their_place() -> None:
    join = Defect("FN", ((1, 1, 1), (1, 1, 5)), 40, "join")
    specks = [_speck(10, 10, 10), _speck(20, 30, 40), _speck(12, 12, 35), _speck(90, 100, 100)]
    out = group_noise([specks[0], join, *specks[1:]], span=(16, 32, 32))
    assert out[0] == join
    assert [len(d.anchors) for d in out[1:]] == [3, 1]        # the far speck stays alone
    assert out[1].size == 24 and out[1].kind == "FP"
    assert group_noise(specks, span=(0, 0, 0)) == specks      # nothing fits together: unchanged


def test_the_advisor_frames_every_piece_of_a_group() -> None:
    mask = np.zeros((48, 128, 128), bool)
    centres = [(20, 40, 40), (28, 60, 50), (22, 50, 68)]
    for z, y, x in centres:
        mask[z:z + 2, y:y + 2, x:x + 2] = True
    image = mask.astype(np.float32) * 0.2
    block = grid_blocks(mask.shape, 128, None)[0]
    region = tuple(slice(0, n) for n in mask.shape)
    ctx = BlockContext(0, block, region, image, mask.copy(), (32, 64, 64), (1.0, 1.0, 1.0))
    defect = group_noise([_speck(*c) for c in centres])[0]
    assert len(defect.anchors) == 3
    tries = LearnedAdvisor(frames=3).candidates(ctx, defect)
    assert tries
    for ins, frame in tries:
        inside = np.zeros(mask.shape, bool)
        inside[frame.window] = True
        assert all(inside[c] for c in centres)                # the frame holds the whole group
        named = np.zeros(mask.shape, bool)
        named[frame.window] = ins.region(frame.shape)
        assert ins.op == "remove" and all(named[c] for c in centres)   # and the sentence names every piece
