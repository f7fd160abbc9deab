"""A judge whose ranking transfers but whose threshold does not is fixed by a few labelled candidates of the
new dataset: the calibration rows of the leave-one-dataset-out study."""

import numpy as np

from neurorefiner.studies.judge_transfer import calibrated_threshold, calibration_rows, markdown


def _shifted_scores(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A perfect ranking on a scale another dataset never saw: every score in [0.05, 0.15]."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(int)
    p = np.where(y == 1, 0.10 + 0.05 * rng.random(n), 0.05 + 0.05 * rng.random(n))
    return p, y


def test_a_threshold_set_on_twenty_labels_recovers_a_ranking_the_transferred_threshold_misses():
    p, y = _shifted_scores()
    transferred = 0.5  # chosen on other datasets: flags nothing here
    assert not (p >= transferred).any()
    (row,) = calibration_rows(p, y, floor=0.8, ks=[20], repeats=20)
    assert row["labelled"] == 20 and row["n"] == 180
    assert row["precision"] >= 0.95 and row["recall"] >= 0.6
    assert row["met"] >= 0.9


def test_a_ranking_that_carries_nothing_is_not_rescued_by_labels():
    rng = np.random.default_rng(1)
    y = (rng.random(300) < 0.3).astype(int)
    p = rng.random(300)  # no relation to y
    (row,) = calibration_rows(p, y, floor=0.8, ks=[20], repeats=20)
    assert row["met"] <= 0.1


def test_too_few_candidates_left_to_score_skips_that_k():
    p, y = _shifted_scores(25)
    assert calibration_rows(p, y, floor=0.8, ks=[20], repeats=3) == []


def test_one_wrong_candidate_on_top_of_a_few_labels_does_not_silence_the_kind():
    p = np.array([0.99, *np.linspace(0.9, 0.5, 12), 0.2, 0.1])
    y = np.array([0, *[1] * 12, 0, 0])
    assert calibrated_threshold(p, y, 0.8) == 0.5  # 12 of the 13 admitted are right: 0.92 >= 0.8 + margin
    assert calibrated_threshold(p[:5], y[:5], 0.8) == 1.1  # 4 of 5: under the floor plus its margin


def test_the_table_shows_how_often_the_target_was_met():
    p, y = _shifted_scores()
    (c,) = calibration_rows(p, y, floor=0.8, ks=[20], repeats=5)
    k = c.pop("labelled")
    row = {"kind": "join", "model": f"logistic + {k} labelled", "held_out": "zbfwb", "subset": "all", "train": 1, **c}
    text = markdown([row], "cmd", "now", "abc", {"join": {"zbfwb": (200, 100)}})
    assert "| join | logistic + 20 labelled | zbfwb | all | 180 |" in text
    assert f"| {100 * c['met']:.0f} % |" in text and "| - |" not in text
