"""The check of the piece a join brings into the tree: a join with a good gap to a large dim blob is not made, a
join to a large piece as bright as the neuron is, small pieces are judged on their gap alone, and the Inspector's
trace says which joins the check turned down."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents.candidates import Candidate, feature_names
from neurorefiner.agents.learned import LearnedInspector
from neurorefiner.agents.learned.attached_piece import PieceCheck
from neurorefiner.agents.learned.judge import Judge, LogisticModel
from neurorefiner.agents.learned.roles import join_gate

SPACING = (1.0, 0.5, 0.5)
SHAPE = (24, 48, 160)
TREE_X = (4, 100)   # the tree: a thick bright fibre, the largest piece
GAP_X = (100, 106)  # a 6-voxel (3 um) cut, bright enough to pass the gap gate
FAR_X = (106, 136)  # the piece beyond the cut (smaller than the tree, over 1000 voxels)


def always_join(p: float = 0.99) -> Judge:
    """A judge that passes every join (and no removal or prune)."""
    models = {}
    for kind, q in {"join": p, "remove": 0.01, "prune": 0.01}.items():
        n = len(feature_names(kind))
        models[kind] = LogisticModel(np.zeros(n), np.ones(n), np.zeros(n), float(np.log(q / (1 - q))))
    return Judge(models, {"join": 0.5, "remove": 0.5, "prune": 0.5})


def tree_and_far_piece(far_signal: float, blob: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A fibre (image 0.9) cut by a short gap that holds signal, and beyond it a large piece: a blob of haze
    (``blob``: a fat box, its voxels speckled around ``far_signal``) or the fibre going on (a tube as thick as the
    tree at ``far_signal``). The mask holds both pieces, the gap is empty; the tree (3,456 voxels) stays the
    largest piece, the far one has 2,880 (blob) or 1,080 (tube) voxels."""
    rng = np.random.default_rng(seed)
    image = rng.normal(0.05, 0.01, SHAPE).astype(np.float32)
    mask = np.zeros(SHAPE, bool)
    tree = (slice(9, 15), slice(21, 27), slice(*TREE_X))
    mask[tree] = True
    image[tree] = 0.9
    image[9:15, 21:27, GAP_X[0]:GAP_X[1]] = 0.6
    far = (slice(8, 16), slice(18, 30), slice(*FAR_X)) if blob else (slice(9, 15), slice(21, 27), slice(*FAR_X))
    mask[far] = True
    image[far] = far_signal + (rng.normal(0.0, 0.05, mask[far].shape) if blob else 0.0)
    return np.clip(image, 0.0, 1.0), mask


def far_join(chosen: list[tuple[Candidate, float]]) -> list[Candidate]:
    return [c for c, _ in chosen if c.kind == "join"]


def test_a_good_gap_to_a_large_blob_of_haze_is_not_joined() -> None:
    image, mask = tree_and_far_piece(far_signal=0.3, blob=True)
    off = LearnedInspector(judge=always_join(), prune=False, join_piece_min_signal=0.0)
    joins = far_join(off.chosen(image, mask, SPACING))
    assert len(joins) == 1, "without the check the judge and the gap gate make this join"
    c = joins[0]
    assert np.expm1(c.features["log_size_small"]) >= 1000
    assert join_gate(c, piece=None), "the gap alone is fine"
    inspector = LearnedInspector(judge=always_join(), prune=False)
    assert far_join(inspector.chosen(image, mask, SPACING)) == []
    assert not join_gate(c), "the gate at its defaults asks about the piece too"
    refused = inspector.refused
    assert len(refused) == 1 and not refused[0]["passes"] and refused[0]["signal_ratio"] < 0.6


def test_a_good_gap_to_a_large_bright_neurite_is_joined() -> None:
    image, mask = tree_and_far_piece(far_signal=0.85, blob=False)
    inspector = LearnedInspector(judge=always_join(), prune=False)
    joins = far_join(inspector.chosen(image, mask, SPACING))
    assert len(joins) == 1 and inspector.refused == []
    assert np.expm1(joins[0].features["log_size_small"]) >= 1000
    assert PieceCheck().ratio(joins[0]) > 0.9


def test_a_small_dim_fragment_is_judged_on_its_gap_alone() -> None:
    """A dim short fragment beyond a cut is where a threshold cut a faint neurite: the check leaves it be."""
    image, mask = tree_and_far_piece(far_signal=0.3, blob=False)
    mask[:, :, 120:] = False                      # the far piece: 6 x 6 x 14 = 504 voxels
    joins = far_join(LearnedInspector(judge=always_join(), prune=False).chosen(image, mask, SPACING))
    assert len(joins) == 1
    assert not PieceCheck().applies(joins[0]) and PieceCheck().ratio(joins[0]) < 0.6


def test_the_inspection_trace_names_the_joins_turned_down() -> None:
    from neurorefiner.agents.roles import GlobalView
    from neurorefiner.topology.blocks import grid_blocks

    image, mask = tree_and_far_piece(far_signal=0.3, blob=True)
    inspector = LearnedInspector(judge=always_join(), prune=False)
    found = inspector.inspect(GlobalView(0, image, mask, grid_blocks(SHAPE, 128, None), SPACING))
    assert not any(d.kind == "FN" for f in found.flags.values() for d in f.defects)
    refused = found.info.raw["joins_refused_for_their_piece"]
    assert len(refused) == 1 and refused[0]["piece_voxels"] >= 1000


def _join(size: int, small: float, big: float) -> Candidate:
    feats = {"log_size_small": float(np.log1p(size)), "small_is_main": 0.0, "small_signal_p50": small,
             "big_signal_p50": big}
    return Candidate("join", ((0, 0, 0), (0, 0, 1)), (2, 1), feats, np.zeros((0, 3), np.int64))


def test_the_check_reads_the_piece_size_and_its_signal_against_the_tree() -> None:
    check = PieceCheck(min_size=1000, min_signal=0.6)
    assert check.passes(_join(999, 0.1, 1.0))          # small: the gap decides
    assert not check.passes(_join(1000, 0.5, 1.0))
    assert check.passes(_join(1000, 0.6, 1.0))
    assert check.passes(_join(5000, 0.1, 0.0))         # a tree without signal gives nothing to compare with
    assert PieceCheck(min_signal=0.0).passes(_join(5000, 0.1, 1.0))   # 0 turns it off
    remove = Candidate("remove", ((0, 0, 0),), (2,), {"log_size": 9.0}, np.zeros((0, 3), np.int64))
    assert check.passes(remove)


def test_a_tree_smaller_than_the_piece_is_no_reference_when_asked() -> None:
    """The soma's piece is brighter than any neurite: with ``skip_small_tree`` a dim piece larger than the
    tree is judged on its gap alone, and a tree larger than the piece still checks it."""
    soma_join = _join(4579, 0.45, 0.90)
    soma_join.features["log_size_big"] = float(np.log1p(3655))
    assert not PieceCheck().passes(soma_join)
    assert PieceCheck(skip_small_tree=True).passes(soma_join)
    big_tree = _join(4579, 0.45, 0.90)
    big_tree.features["log_size_big"] = float(np.log1p(20000))
    assert not PieceCheck(skip_small_tree=True).passes(big_tree)


@pytest.mark.parametrize("kwargs", [{"min_size": -1}, {"min_signal": -0.1}, {"min_signal": 1.5}])
def test_bad_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PieceCheck(**kwargs)


def test_the_agent_config_holds_the_check_at_its_defaults() -> None:
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir

    node = OmegaConf.load(conf_dir() / "agent" / "learned.yaml").inspector
    assert node.join_piece_min_size == PieceCheck.min_size
    assert node.join_piece_min_signal == PieceCheck.min_signal
    assert node.join_piece_skip_small_tree == PieceCheck.skip_small_tree
