"""The synthetic presets' post-processing chooser (experiments/segmenters/synthetic/choose_postprocess.py)
follows the rule in its header (postprocess_grid.choose_setting, shared with cv_dev.py): best mean F1, within 0.01
the lower SSD, then no bridging, then 0.5."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from neurorefiner.postprocessing.choose import choose_setting

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "choose_postprocess", ROOT / "experiments" / "segmenters" / "synthetic" / "choose_postprocess.py")
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)


def _row(case: str, thr: float, bridge: float, f1: float, ssd: float) -> dict:
    return {"case": case, "threshold": thr, "bridge_um": bridge, "PRE": f1, "REC": f1, "F1": f1, "SD": ssd,
            "SSD": ssd}


def test_means_over_volumes_then_the_rule():
    rows = [_row("v0", 0.5, 0.0, 0.40, 20.0), _row("v1", 0.5, 0.0, 0.60, 20.0),  # mean 0.50
            _row("v0", 0.4, 3.0, 0.55, 12.0), _row("v1", 0.4, 3.0, 0.49, 12.0),  # mean 0.52: best F1
            _row("v0", 0.3, 0.0, 0.20, 5.0), _row("v1", 0.3, 0.0, 0.20, 5.0)]
    summary = cp.summarise(rows)
    assert [s["threshold"] for s in summary] == [0.4, 0.5, 0.3]
    assert summary[0]["F1"] == pytest.approx(0.52) and summary[0]["volumes"] == 2
    chosen = choose_setting(summary)
    assert (chosen["threshold"], chosen["bridge_um"]) == (0.4, 3.0)  # 0.50 is not within 0.01


def test_ties_go_to_lower_ssd_then_no_bridging_then_threshold_near_half():
    summary = cp.summarise([_row("v", 0.5, 3.0, 0.60, 10.0), _row("v", 0.6, 0.0, 0.595, 10.0),
                            _row("v", 0.4, 0.0, 0.595, 10.0), _row("v", 0.3, 0.0, 0.65, 30.0)])
    assert choose_setting(summary)["threshold"] == 0.3  # 0.65 beats the others by more than 0.01
    summary = [s for s in summary if s["threshold"] != 0.3]
    chosen = choose_setting(summary)
    assert chosen["bridge_um"] == 0.0 and chosen["threshold"] in (0.4, 0.6)
    summary.append({**summary[0], "threshold": 0.55, "bridge_um": 0.0, "F1": 0.6, "SSD": 9.0})
    assert choose_setting(summary)["threshold"] == 0.55  # lower SSD first


def test_the_rule_refuses_an_empty_summary():
    with pytest.raises(ValueError, match="no setting"):
        choose_setting([])
