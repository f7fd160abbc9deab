"""Joins valued as the tables' F1 values them: by what the attached piece adds on the gold and off it."""

from __future__ import annotations

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex, LabelSettings
from neurorefiner.adaptation.judge.model_fit import balanced_weights, fit_logistic
from neurorefiner.adaptation.judge.training import LabelledSet, valued_case
from neurorefiner.agents.candidates import feature_names
from neurorefiner.agents.learned.judge import Judge, LogisticModel
from neurorefiner.io.swc import Tree

SPACING = (1.0, 0.5, 0.5)
SHAPE = (16, 80, 96)


def _gold() -> Tree:
    xs = np.arange(4, 92, 2, dtype=float)
    zyx = np.stack([np.full_like(xs, 8), np.full_like(xs, 24), xs], axis=1)
    return Tree.from_points(zyx, np.arange(-1, len(xs) - 1))


def _case(turns_away: bool, far: int = 92) -> tuple[np.ndarray, np.ndarray]:
    """The tree (x 4..40) along the gold, a 12-voxel gap on it, then the attached piece: along the gold to
    ``far`` or, ``turns_away``, a few voxels along it and then off it (a bright false piece)."""
    mask = np.zeros(SHAPE, bool)
    mask[7:10, 23:26, 4:40] = True
    if turns_away:
        mask[7:10, 23:26, 52:58] = True
        mask[7:10, 23:76, 55:58] = True
    else:
        mask[7:10, 23:26, 52:far] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    image[7:10, 23:26, 40:52] = 0.8            # signal in the gap: the gap itself is right
    return image, mask


def _join(image: np.ndarray, mask: np.ndarray) -> tuple[int | None, float]:
    index = GoldIndex(_gold(), SPACING, SHAPE, LabelSettings(scope_margin=60))
    cands, labels, weights = valued_case(image, mask, index, SPACING, root=(8, 24, 10))
    joins = [(y, w) for c, y, w in zip(cands, labels, weights) if c.kind == "join"]
    assert len(joins) == 1
    return joins[0]


def test_a_true_gap_that_attaches_a_false_piece_is_a_wrong_join() -> None:
    label, _ = _join(*_case(turns_away=True))
    assert label == 0


def test_a_true_join_weighs_the_traced_length_it_adds() -> None:
    long_label, long_weight = _join(*_case(turns_away=False, far=92))
    short_label, short_weight = _join(*_case(turns_away=False, far=60))
    assert long_label == 1 and short_label == 1
    assert long_weight > 2 * short_weight


def test_the_labels_read_the_gap_alone_when_join_value_is_off() -> None:
    image, mask = _case(turns_away=True)
    index = GoldIndex(_gold(), SPACING, SHAPE, LabelSettings(scope_margin=60, join_value=False))
    cands, labels, weights = valued_case(image, mask, index, SPACING, root=(8, 24, 10))
    assert [y for c, y in zip(cands, labels) if c.kind == "join"] == [1] and set(weights) == {1.0}


def test_balanced_weights_equal_balanced_classes_when_every_weight_is_one() -> None:
    y = np.array([0, 0, 0, 1])
    assert np.allclose(balanced_weights(y), [4 / 6, 4 / 6, 4 / 6, 2.0])
    w = balanced_weights(y, np.array([1.0, 3.0, 1.0, 5.0]))
    assert np.isclose(w[y == 0].sum(), 2.0) and np.isclose(w[y == 1].sum(), 2.0) and np.isclose(w[1], 3 * w[0])


def test_weights_steer_the_fit() -> None:
    """Two look-alike candidates with opposite labels: the heavier one's label wins."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 1))
    y = (x[:, 0] > 0).astype(int)
    flip = np.abs(x[:, 0]) < 0.3
    y[flip] = 1 - y[flip]                       # a band of contrary labels around zero
    plain = fit_logistic(x, y)
    heavy = fit_logistic(x, y, weight=np.where(flip, 50.0, 1.0))
    assert plain is not None and heavy is not None and heavy.coef[0] < plain.coef[0]


def test_a_labelled_set_keeps_its_weights_through_rows_and_subsets() -> None:
    image, mask = _case(turns_away=False)
    index = GoldIndex(_gold(), SPACING, SHAPE, LabelSettings(scope_margin=60))
    cands, labels, weights = valued_case(image, mask, index, SPACING, root=(8, 24, 10))
    data = LabelledSet.empty()
    data.add(cands, labels, "a", weights)
    back = LabelledSet.from_rows(data.rows())
    assert np.allclose(back.weights("join"), data.weights("join"))
    sub = data.subset({k: data.groups[k] == "a" for k in data.y})
    assert np.allclose(sub.weights("join"), data.weights("join"))


def test_a_judge_keeps_the_columns_it_was_trained_on() -> None:
    """A judge stored before a join feature was added still loads and reads its own columns."""
    old = feature_names("join")[:21]
    judge = Judge({"join": LogisticModel(np.zeros(21), np.ones(21), np.eye(21)[0], 0.0)}, {"join": 0.5},
                  columns={"join": old})
    back = Judge.from_json(judge.to_json())
    assert back.names("join") == old
    image, mask = _case(turns_away=False)
    from neurorefiner.agents.candidates import find_candidates

    cands = [c for c in find_candidates(image, mask, SPACING).candidates if c.kind == "join"]
    p = back.probabilities(cands)
    assert np.allclose(p, 1 / (1 + np.exp(-cands[0].features["gap_um"])))
    bad = judge.to_json()
    bad["kinds"]["join"]["features"] = [*old, "no_such_feature"]
    import pytest

    with pytest.raises(ValueError, match="no_such_feature"):
        Judge.from_json(bad)


def test_the_transfer_study_reads_a_stored_judge_through_its_own_columns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A mined table carries today's columns; a judge stored with fewer is handed its own, in its order."""
    from neurorefiner.adaptation.judge.mining import CandidateTable
    from neurorefiner.studies.judge_transfer import shipped_rows

    names = feature_names("join")
    rng = np.random.default_rng(0)
    n = 40
    x = rng.normal(size=(n, len(names)))
    y = (x[:, 0] > 0).astype(int)
    fams = np.array(["diadem"] * 10 + ["zbfwb"] * 30, dtype=object)
    table = CandidateTable("join", x, y, np.zeros((n, 3, 1, 1, 1), np.uint8), fams,
                           np.array([f"{f}/c{i % 3}" for i, f in enumerate(fams)], dtype=object),
                           np.full(n, "unet3d", dtype=object), np.zeros(n, int))
    old = names[:21]
    judge = Judge({"join": LogisticModel(np.zeros(21), np.ones(21), 5 * np.eye(21)[0], 0.0)}, {"join": 0.5},
                  columns={"join": old})
    rows = shipped_rows(table, judge.save(tmp_path / "judge.json"))
    assert rows and all(r["precision"] == 1.0 for r in rows if r.get("flagged", 1))


def test_train_judge_stamps_the_commit_it_started_from(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A judge trained beside another job that writes a tracked file (a choose run's plan) read that file as its
    own dirty tree, because the stamp was taken after the long labelling."""
    import neurorefiner.paths as paths
    from neurorefiner.adaptation.judge import training

    stamps = iter(["abc1234", "abc1234+dirty", "abc1234+dirty"])
    monkeypatch.setattr(paths, "git_commit", lambda *a, **k: next(stamps))
    monkeypatch.setattr(training, "gold_cases", lambda *a, **k: [])
    path, _ = training.train_judge("synthetic_zbfwb", "train", ["unet3d"], str(tmp_path / "judge.json"),
                                   progress=False)
    assert Judge.load(path).meta["commit"] == "abc1234"
