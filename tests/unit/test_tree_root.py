"""The tree the Inspector grows is the piece at the soma when the root is given: a small piece at the root with a
large foreign fibre beside it gets its own joins, which the largest-piece rule never offered."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from neurorefiner.agents.candidates import find_candidates
from neurorefiner.errors import InputError
from neurorefiner.evaluation.methods import NeuroRefiner
from neurorefiner.refine.local import soma_root
from neurorefiner.refine.run import differences
from neurorefiner.topology.components import label_components
from neurorefiner.topology.tree_root import tree_piece

SHAPE = (10, 40, 80)


def scene() -> tuple[np.ndarray, np.ndarray]:
    """A long foreign fibre (y 30-32, x 2-78: the largest piece), the root's piece (y 8-10, x 2-20) and its
    continuation beyond a 4-voxel gap (x 24-40), far from the fibre."""
    mask = np.zeros(SHAPE, bool)
    mask[4:7, 30:33, 2:78] = True
    mask[4:7, 8:11, 2:20] = True
    mask[4:7, 8:11, 24:40] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    image[4:7, 8:11, 20:24] = 0.6   # the gap holds signal
    return image, mask


ROOT = (5.0, 9.0, 3.0)   # ZYX: on the root's piece


def test_the_tree_is_the_piece_at_the_root_else_the_largest() -> None:
    _, mask = scene()
    labels, _ = label_components(mask)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    largest = int(labels[5, 31, 40])
    at_root = int(labels[5, 9, 10])
    assert tree_piece(labels, sizes, (1, 1, 1)) == largest
    assert tree_piece(labels, sizes, (1, 1, 1), ROOT) == at_root
    # a root off the mask takes the piece with the nearest voxel (in um: z counts at its spacing)
    assert tree_piece(labels, sizes, (1, 1, 1), (5.0, 14.0, 10.0)) == at_root
    assert tree_piece(labels, sizes, (1, 1, 1), (5.0, 25.0, 10.0)) == largest
    with pytest.raises(ValueError, match="not a finite"):
        tree_piece(labels, sizes, (1, 1, 1), (np.nan, 1.0, 1.0))
    empty = np.zeros(SHAPE, np.int32)
    assert tree_piece(empty, np.zeros(1, np.int64), (1, 1, 1), ROOT) == 0


def test_joins_grow_the_root_piece_when_the_root_is_given() -> None:
    image, mask = scene()
    without = find_candidates(image, mask, (1.0, 1.0, 1.0), kinds=("join",))
    given = find_candidates(image, mask, (1.0, 1.0, 1.0), kinds=("join",), root=ROOT)
    labels = given.labels
    at_root, beyond = int(labels[5, 9, 10]), int(labels[5, 9, 30])
    assert not without.candidates      # the largest piece is the foreign fibre: no join reaches the gap
    assert given.main == at_root
    joins = [c.pieces for c in given.candidates]
    # the tree is the side attached to, even when the loose piece is as large or larger
    assert joins == [(beyond, at_root)]
    f = given.candidates[0].features
    assert f["big_is_main"] == 1.0 and f["small_is_main"] == 0.0


def test_the_soma_marker_of_refine_py_is_the_root_in_zyx() -> None:
    assert soma_root(OmegaConf.create({"tracing": {"marker": None}})) is None
    assert soma_root(OmegaConf.create({})) is None
    assert soma_root(OmegaConf.create({"tracing": {"marker": [3, 9, 5]}})) == (5.0, 9.0, 3.0)
    with pytest.raises(InputError, match="tracing.marker must be x,y,z"):
        soma_root(OmegaConf.create({"tracing": {"marker": [3, 9]}}))


def test_a_run_with_another_root_is_another_run() -> None:
    base = {"version": 1, "image_hash": "a", "mask_hash": "b"}
    assert differences(base, dict(base)) == []
    assert differences(base, {**base, "root_zyx": [5.0, 9.0, 3.0]}) == ["another root (soma) position"]


def test_the_evaluation_method_refuses_an_unknown_tree_root() -> None:
    with pytest.raises(InputError, match="tree_root must be one of gold, largest"):
        NeuroRefiner(agent={"backend": "heuristic"}, tree_root="soma")


def test_the_inspector_reads_the_root_from_its_view() -> None:
    from neurorefiner.agents.candidates import feature_names
    from neurorefiner.agents.learned import LearnedInspector
    from neurorefiner.agents.learned.judge import Judge, LogisticModel
    from neurorefiner.agents.roles import GlobalView
    from neurorefiner.topology.blocks import grid_blocks

    models = {k: LogisticModel(np.zeros(len(feature_names(k))), np.ones(len(feature_names(k))),
                               np.zeros(len(feature_names(k))), 2.0) for k in ("join", "remove")}
    inspector = LearnedInspector(judge=Judge(models, {"join": 0.5, "remove": 0.5}), prune=False, group_noise=False)
    image, mask = scene()
    blocks = grid_blocks(SHAPE, 20)

    def joins(root):  # type: ignore[no-untyped-def]
        flags = inspector.inspect(GlobalView(0, image, mask, blocks, (1.0, 1.0, 1.0), root=root)).flags
        return [d for f in flags.values() for d in f.defects if d.kind == "FN"]

    assert joins(None) == []
    assert len(joins(ROOT)) == 1


def test_the_classical_refiner_bridges_to_the_root_piece_when_told() -> None:
    from neurorefiner.baselines.classical import classical_refine

    image, mask = scene()
    gap = np.zeros(SHAPE, bool)
    gap[4:7, 8:11, 20:24] = True
    plain = classical_refine(image, mask, min_size=0, max_gap=6)
    rooted = classical_refine(image, mask, min_size=0, max_gap=6, root=ROOT)
    assert not (plain & gap).any()      # the root's piece and its continuation are both "loose" pieces
    assert (rooted & gap).sum() >= 4    # bridged across the 4-voxel gap


def test_the_evaluation_methods_take_the_root_from_the_case_when_asked() -> None:
    from neurorefiner.evaluation.methods import Classical, case_root
    from neurorefiner.io.swc import Tree

    class OneCase:
        def gold(self) -> Tree:
            return Tree.from_points(np.array([[5.0, 9.0, 3.0], [5.0, 9.0, 30.0]]), np.array([-1, 0]))

    assert case_root(OneCase(), "gold") == (5.0, 9.0, 3.0)
    assert case_root(OneCase(), "largest") is None
    image, mask = scene()
    gap = (slice(4, 7), slice(8, 11), slice(20, 24))
    assert Classical(tree_root="gold", min_size=0, max_gap=6.0)(image, mask, OneCase())[gap].any()
    assert not Classical(min_size=0, max_gap=6.0)(image, mask, OneCase())[gap].any()
    with pytest.raises(InputError, match="tree_root"):
        Classical(tree_root="soma")


def test_the_judge_learns_on_the_joins_of_the_root_piece_when_told() -> None:
    """A judge for runs told the soma is trained on the candidates those runs meet: with ``tree_root=gold`` the
    join at the root's piece is labelled (true: the gold runs through the gap); with the largest piece it is
    never met."""
    from neurorefiner.adaptation.judge.training import GoldCase, labelled_set
    from neurorefiner.io.swc import Tree

    image, mask = scene()
    xs = np.arange(2.0, 40.0, 2.0)
    gold = Tree.from_points(np.stack([np.full_like(xs, 5.0), np.full_like(xs, 9.0), xs], axis=1),
                            np.arange(-1, len(xs) - 1))
    gc = GoldCase("c", "s", image, mask, gold, (1.0, 1.0, 1.0))
    assert gc.root("gold") == (5.0, 9.0, 2.0) and gc.root("largest") is None
    largest, _ = labelled_set([gc], progress=False, augment=0)
    at_root, _ = labelled_set([gc], progress=False, augment=0, tree_root="gold")
    assert len(largest.y["join"]) == 0
    assert at_root.y["join"].tolist() == [1]
    with pytest.raises(ValueError, match="tree_root must be one of"):
        gc.root("soma")


def test_the_nearest_foreground_voxel_is_nearest_in_micrometres_not_in_voxels() -> None:
    from neurorefiner.topology.tree_root import nearest_foreground

    mask = np.zeros((9, 9, 9), bool)
    mask[4, 4, 8] = True   # 4 voxels away along x
    mask[7, 4, 4] = True   # 3 voxels away along z, but z steps are 2 um
    assert tuple(nearest_foreground(mask, (4, 4, 4), (1.0, 1.0, 1.0))) == (7, 4, 4)
    assert tuple(nearest_foreground(mask, (4, 4, 4), (2.0, 1.0, 1.0))) == (4, 4, 8)
    assert nearest_foreground(np.zeros_like(mask), (4, 4, 4), (1.0, 1.0, 1.0)) is None
