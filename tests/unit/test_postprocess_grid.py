"""Scoring one probability map under many post-processings: every setting gets a row, and settings that
give the same mask are traced (scored) once."""

from __future__ import annotations

import numpy as np

from neurorefiner.postprocessing import choose as grid


def test_identical_masks_are_scored_once(monkeypatch):
    calls = []

    def fake_score(gold, mask, spacing):
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
