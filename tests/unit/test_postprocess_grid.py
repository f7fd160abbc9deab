"""Scoring one probability map under many post-processings: every setting gets a row, and settings that
give the same mask are traced (scored) once."""

from __future__ import annotations

import numpy as np

from neurorefiner.postprocessing import choose as grid


def test_identical_masks_are_scored_once(monkeypatch):
    calls = []

    def fake_score(gold, mask, spacing, **kwargs):
        calls.append(int(mask.sum()))
        return {"PRE": 1.0, "REC": 1.0, "F1": float(mask.sum()), "SD": 0.0, "SSD": 0.0, "extra": 9.0}

    monkeypatch.setattr(grid, "score_mask", fake_score)
    probs = np.zeros((4, 8, 8), np.float32)
    probs[1, 2, 1:7] = 0.9   # one bright fibre ...
    probs[2, 6, 6] = 0.55    # ... and one faint voxel, away from it
    settings = grid.settings_grid((0.5, 0.6, 0.7), (0,), (0, 1))
    out = list(grid.score_settings(probs, None, (1.0, 1.0, 1.0), settings))
    assert [p for p, _ in out] == settings
    # masks: 0.5 -> fibre + voxel, 0.5 keep-largest / 0.6 / 0.7 -> fibre only: two distinct masks
    assert sorted(calls) == [6, 7]
    assert [s["F1"] for _, s in out] == [7.0, 6.0, 6.0, 6.0, 6.0, 6.0]
    assert set(out[0][1]) == set(grid.SCORE_KEYS)


def test_root_seeded_scoring_refuses_a_keep_largest_that_drops_the_roots_piece():
    """A bright distractor larger than the neuron's piece: keeping the largest component drops the neuron.
    Scored root-seeded, as the stand-in tables report, that setting must lose to keeping every component."""
    from neurorefiner.io.swc import Tree
    from neurorefiner.postprocessing.choose import choose_setting

    probs = np.zeros((9, 40, 80), np.float32)
    probs[3:6, 5:8, 5:35] = 0.9        # the neuron the gold traces (30 voxels long)
    probs[3:6, 30:33, 5:75] = 0.9      # an untraced distractor, longer: the largest component
    n = 30
    gold = Tree.from_points(np.stack([np.full(n, 4.0), np.full(n, 6.0), np.arange(5, 5 + n, dtype=float)], 1),
                            np.arange(n) - 1)
    settings = grid.settings_grid((0.5,), (0,), (0, 1))
    rows = []
    for post, s in grid.score_settings(probs, gold, (1.0, 1.0, 1.0), settings, root_seeded=True):
        rows.append({"threshold": post.threshold, "keep_largest": post.keep_largest, **s})
    by_keep = {r["keep_largest"]: r for r in rows}
    assert by_keep[0]["F1"] > 0.8 > by_keep[1]["F1"]
    assert choose_setting(rows)["keep_largest"] == 0
