"""Chains of fragments: a break made of two gaps in a row, with the far fragment beyond the join search's reach
from the tree, is judged as one join and planned gap by gap (or, across a speck, as one join naming its ends)."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.candidates import feature_names, find_candidates
from neurorefiner.agents.learned import LearnedInspector
from neurorefiner.agents.learned.chains import find_chains, plan
from neurorefiner.agents.learned.judge import Judge, LogisticModel
from neurorefiner.agents.roles import GlobalView
from neurorefiner.topology.blocks import grid_blocks

SHAPE = (12, 16, 96)


def fibre(x0: int, x1: int) -> np.ndarray:
    """A straight 3 x 3 fibre along x from ``x0`` to ``x1`` (exclusive)."""
    m = np.zeros(SHAPE, bool)
    m[5:8, 7:10, x0:x1] = True
    return m


def broken_twice(middle: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tree (x 2-37), a ``middle`` piece, the far fragment (x 52-71: 15 voxels from the tree, beyond the
    8 um reach); the image bright along the whole fibre, gaps a little dimmer."""
    image = np.where(fibre(2, 72), 0.6, 0.05).astype(np.float32)
    mask = fibre(2, 38) | middle | fibre(52, 72)
    image[mask] = 0.9
    return image, mask


def always(kind_p: dict[str, float]) -> Judge:
    """A judge that gives every candidate of a kind the same probability (threshold 0.5)."""
    models = {}
    for kind, p in kind_p.items():
        n = len(feature_names(kind))
        models[kind] = LogisticModel(np.zeros(n), np.ones(n), np.zeros(n), float(np.log(p / (1 - p))))
    return Judge(models, dict.fromkeys(kind_p, 0.5))


def joined_pieces(chosen, labels) -> set[int]:  # type: ignore[no-untyped-def]
    """The pieces the chosen joins' ends lie on."""
    return {int(labels[tuple(a)]) for c, _ in chosen if c.kind == "join" for a in c.anchors}


def test_the_tree_search_reaches_only_the_first_fragment_the_chain_search_plans_both() -> None:
    image, mask = broken_twice(fibre(43, 47))   # a 36-voxel stub, 5 um from the tree and from the far one
    judge = always({"join": 0.9, "remove": 0.9})
    found = find_candidates(image, mask, (1.0, 1.0, 1.0))
    labels = found.labels
    far, stub = int(labels[6, 8, 60]), int(labels[6, 8, 44])
    old = LearnedInspector(judge=judge, prune=False).chosen(image, mask, (1.0, 1.0, 1.0))
    new = LearnedInspector(judge=judge, prune=False, chain_joins=True).chosen(image, mask, (1.0, 1.0, 1.0))
    assert far not in joined_pieces(old, labels) and stub in joined_pieces(old, labels)
    assert any(c.kind == "remove" and c.pieces[0] == far for c, _ in old)   # and the far fragment is deleted
    assert {stub, far} <= joined_pieces(new, labels)
    links = [c for c, _ in new if c.kind == "join" and "chain_gaps" in c.features]
    assert len(links) == 1 and set(links[0].pieces) == {far, stub}   # the tree -> stub gap is already chosen
    assert not any(c.kind == "remove" and c.pieces[0] == far for c, _ in new)


def test_a_gap_ending_at_a_speck_is_merged_with_the_next_into_one_instruction() -> None:
    speck = np.zeros(SHAPE, bool)
    speck[6:8, 7:9, 44:46] = True              # 8 voxels, 7 um from the tree and from the far fragment
    image, mask = broken_twice(speck)
    found = find_candidates(image, mask, (1.0, 1.0, 1.0), kinds=("join",))
    assert found.candidates == []          # the speck ends no join, the far fragment is out of reach
    chains = find_chains(found)
    assert len(chains) == 1 and len(chains[0].links) == 2
    steps = plan(found, chains[0])
    assert len(steps) == 1
    end, start = steps[0].anchors
    assert end[2] == 52 and start[2] == 37   # from the far fragment's end to the tree's end, across the speck
    assert 13.0 <= steps[0].features["gap_um"] <= 15.0 and steps[0].features["path_q25"] > 0.25


def test_the_inspector_flags_each_gap_of_a_chain_as_a_break() -> None:
    image, mask = broken_twice(fibre(43, 47))
    inspector = LearnedInspector(judge=always({"join": 0.9}), prune=False, chain_joins=True)
    view = GlobalView(0, image, mask, grid_blocks(mask.shape, 128), (1.0, 1.0, 1.0))
    defects = [d for f in inspector.inspect(view).flags.values() for d in f.defects if d.kind == "FN"]
    assert len(defects) == 2 and "a chain of 2 gaps" in defects[1].note
