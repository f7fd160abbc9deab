"""The cross-validation over DIADEM dev (neurorefiner.studies.cross_validation, `neurorefiner study segmenter-cv`):
folds never overlap, run directories name their fold, and the choice follows the rule in the module's doc."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import neurorefiner.studies.cross_validation as cv
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError


def test_folds_cover_dev_once_and_never_test():
    held = [c for cases in cv.FOLDS.values() for c in cases]
    assert sorted(held) == [f"OP_{i}" for i in range(1, 7)]
    assert not {"OP_7", "OP_8", "OP_9"} & set(held)


def test_run_directories_name_fold_and_steps():
    assert cv.parse_run(Path("cv/f2_768")) == (2, 768)
    with pytest.raises(InputError, match="f<fold>_<steps>"):
        cv.parse_run(Path("cv/fold2"))
    with pytest.raises(InputError, match="fold in"):
        cv.parse_run(Path("cv/f9_256"))


def _rows(steps: int, thr: float, f1s: tuple[float, float], ssd: float, keep: int = 0, members: int = 1,
          run: str = "cv", bridge: float = 0.0) -> list[dict]:
    return [{"members": members, "steps": steps, "run": run, "threshold": thr, "bridge_um": bridge, "dust_voxels": 0,
             "keep_largest": keep, "case": c, "PRE": f1, "REC": f1, "F1": f1, "SD": ssd / 2, "SSD": ssd}
            for c, f1 in zip(("OP_1", "OP_2"), f1s)]


def test_choice_is_best_mean_f1_then_lower_ssd_within_the_tie_band():
    rows = (_rows(256, 0.5, (0.80, 0.90), 30.0) + _rows(768, 0.5, (0.86, 0.86), 20.0)  # 0.85 vs 0.86
            + _rows(768, 0.7, (0.70, 0.70), 5.0))  # lowest SSD, but far below the best F1
    summary, chosen = cv.summarise(rows, n_cases=2)
    assert (chosen["steps"], chosen["threshold"]) == (768, 0.5)  # 0.85 is within 0.01 of 0.86; SSD 20 < 30
    assert summary[0]["F1"] == pytest.approx(0.86)
    rows += _rows(256, 0.6, (0.95, 0.95), 40.0)  # clearly the best F1: SSD no longer matters
    assert cv.summarise(rows, n_cases=2)[1]["threshold"] == 0.6


def test_settings_missing_a_case_are_not_compared():
    rows = _rows(256, 0.5, (0.5, 0.5), 30.0) + _rows(768, 0.5, (0.9, 0.9), 10.0)[:1]
    summary, chosen = cv.summarise(rows, n_cases=2)
    assert [s["steps"] for s in summary] == [256] and chosen["steps"] == 256


def test_simpler_setting_breaks_exact_ties():
    rows = _rows(256, 0.5, (0.8, 0.8), 10.0, keep=1) + _rows(256, 0.5, (0.8, 0.8), 10.0, keep=0)
    assert cv.summarise(rows, n_cases=2)[1]["keep_largest"] == 0


def test_seeds_of_one_network_are_averaged_per_case_before_the_cases():
    # seed 1 ran on OP_1 only (as fold 3 once had a second seed alone): OP_1's two figures average first, so
    # OP_1 and OP_2 weigh the same ((0.9 + 0.7) / 2 and 0.5 -> 0.65, where a flat mean of rows gives 0.7)
    rows = _rows(256, 0.5, (0.9, 0.5), 10.0, run="cv") + _rows(256, 0.5, (0.7, 0.7), 30.0, run="cv_seed1")[:1]
    summary, _ = cv.summarise(rows, n_cases=2)
    assert summary[0]["F1"] == pytest.approx(0.65)
    assert summary[0]["SSD"] == pytest.approx(15.0) and summary[0]["cases"] == 2


def test_an_ensemble_wins_only_beyond_the_tie_band_or_on_ssd():
    single = _rows(256, 0.8, (0.80, 0.80), 20.0, run="cv") + _rows(256, 0.8, (0.80, 0.80), 20.0, run="cv_seed1")
    tied = _rows(256, 0.8, (0.805, 0.805), 20.0, members=2, run="cv_ens2")
    assert cv.summarise(single + tied, n_cases=2)[1]["members"] == 1  # same SSD: the single network is simpler
    better_ssd = _rows(256, 0.8, (0.805, 0.805), 15.0, members=2, run="cv_ens2")
    assert cv.summarise(single + better_ssd, n_cases=2)[1]["members"] == 2


def test_ensemble_command_refuses_members_of_other_folds(tmp_path):
    with pytest.raises(InputError, match="share one"):
        cv.write_ensemble([tmp_path / "cv" / "f1_256", tmp_path / "cv_seed1" / "f2_256"],
                          tmp_path / "cv_ens2" / "f1_256", threads=1)


def test_scores_are_cached_per_map_and_grid(tmp_path, monkeypatch):
    import os
    import types

    import numpy as np

    import neurorefiner.postprocessing.choose as grid_mod

    run = tmp_path / "cv" / "f1_256"
    (run / "oof_probs").mkdir(parents=True)
    for name in ("OP_1", "OP_2"):
        np.save(run / "oof_probs" / f"{name}.npy", np.zeros((2, 2, 2), np.float16))
    calls = []

    def fake_score(probs, gold, spacing, grid):
        calls.append(len(grid))
        return [(post, {"PRE": 1.0, "REC": 1.0, "F1": 1.0, "SD": 0.0, "SSD": 0.0}) for post in grid]

    monkeypatch.setattr(grid_mod, "score_settings", fake_score)
    monkeypatch.setattr(cv, "members_of", lambda r: 1)
    case = types.SimpleNamespace(gold=lambda: None, spacing=(1.0, 1.0, 1.0))
    monkeypatch.setattr(cv, "dev_cases", lambda: {"OP_1": case, "OP_2": case})
    first = cv.score_runs([run], thresholds=(0.5,))
    assert len(calls) == 2 and len(first) == 2 * 4  # 1 threshold x dust 0/1000 x keep 0/1, two cases
    assert cv.score_runs([run], thresholds=(0.5,)) == first and len(calls) == 2  # cached
    cv.score_runs([run], thresholds=(0.5, 0.6))
    assert len(calls) == 4  # another grid: traced again
    os.utime(run / "oof_probs" / "OP_1.npy", ns=(1, 1))  # the map changed
    cv.score_runs([run], thresholds=(0.5, 0.6))
    assert len(calls) == 5


def test_case_map_normalises_and_windows_like_the_tables(tmp_path):
    import types

    import numpy as np
    import torch

    from neurorefiner.inference.segmenter import export_segmenter, load_segmenter, segment_array
    from neurorefiner.models.segmenters.unet3d import UNet3D

    torch.manual_seed(0)
    cfg = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "features": [4, 8], "first_stride": [1, 2, 2]}
    seg = load_segmenter(export_segmenter(UNet3D(features=(4, 8), first_stride=(1, 2, 2)), cfg, tmp_path / "u.pt",
                                          (8, 16, 16), normalization={"method": "percentile", "percentiles": [1, 99]}))
    raw = (np.random.default_rng(0).random((10, 20, 24)) * 1000).astype(np.float32)
    case = types.SimpleNamespace(image=lambda: types.SimpleNamespace(load=lambda: raw), image_path=tmp_path / "x.tif")
    probs, window = cv.case_map(seg, case)
    assert window == (10, 20, 24) and probs.shape == raw.shape
    assert np.allclose(probs, segment_array(seg, raw)[1], atol=1e-6)  # the same map `neurorefiner segment` makes


def test_settings_over_the_speed_budget_are_listed_but_not_chosen():
    # without the budget a three-network average (F1 +0.006) that takes 61 s on 256^3 was chosen; 30 s allowed
    single = _rows(256, 0.8, (0.85, 0.85), 11.0)
    average = _rows(256, 0.7, (0.86, 0.86), 10.6, members=3, run="cv_ens3")
    seconds = {1: 19.6, 3: 58.8}.__getitem__
    assert cv.summarise(single + average, n_cases=2)[1]["members"] == 3  # no budget: the average wins
    summary, chosen = cv.summarise(single + average, n_cases=2, seconds_of=seconds, budget_s=30.0)
    assert chosen["members"] == 1 and chosen["threshold"] == 0.8
    assert [s["over_budget"] for s in summary] == [True, False]  # still reported, best F1 first
    with pytest.raises(InputError, match="over the 10.0 s"):
        cv.summarise(single + average, n_cases=2, seconds_of=seconds, budget_s=10.0)


def test_inference_seconds_scale_the_benched_single_network(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([{"case": cv.SINGLE_BENCH_CASE, "median_s": 20.0}]))
    assert cv.inference_seconds(bench, 3) == pytest.approx(60.0)
    bench.write_text("[]")
    with pytest.raises(InputError, match="bench.run"):
        cv.inference_seconds(bench, 1)


def test_the_command_refuses_a_misnamed_run_in_one_line(tmp_path):
    done = CliRunner().invoke(app, ["study", "segmenter-cv", "probs", "--run", str(tmp_path / "fold2")])
    assert done.exit_code == 2 and "f<fold>_<steps>" in done.output and "Traceback" not in done.output
    done = CliRunner().invoke(app, ["study", "segmenter-cv", "choose", str(tmp_path / "f1_256"), "--out", str(tmp_path),
                                    "--bench", str(tmp_path / "none.json")])
    assert done.exit_code == 2 and "bench JSON not found" in done.output  # before any tracing
