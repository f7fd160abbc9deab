"""The crop pick vs the whole-volume snapshot choice of the SYNTHETIC stand-in U-Nets on fresh volumes
(neurorefiner.studies.checkpoint_choice, experiments/standins/run_checkpoint_choice.sh)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import write_rows_csv
from neurorefiner.studies.checkpoint_choice import checkpoint_choice_table

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("case", "method", "protocol", "segmenter", "PRE", "REC", "F1", "SD", "SSD", "method_key")


def _fresh(folder: Path, which: str, f1s: list[float], protocol: str = "root_seeded") -> None:
    out = folder / "fresh" / f"synthetic_cwmbs_weak_{which}"
    out.mkdir(parents=True)
    rows = [{"case": f"synthetic_cwmbs_weak_test_{i:03d}", "method": "initial", "protocol": protocol, "segmenter": "x",
             "PRE": 0.9, "REC": f1, "F1": f1, "SD": 5.0, "SSD": 10.0, "method_key": "k"} for i, f1 in enumerate(f1s)]
    write_rows_csv(out / "per_volume.csv", rows, FIELDS)


def test_both_checkpoints_beside_the_target_with_the_snapshot_named(tmp_path: Path) -> None:
    stem = tmp_path / "synthetic_cwmbs_weak_unet3d_candidates_postprocess_val"
    stem.with_suffix(".json").write_text(json.dumps({"threshold": 0.2, "checkpoint": "a/snapshots/step000300.pt"}))
    stem.with_suffix(".md").write_text("**Chosen: checkpoint step000300, threshold 0.2, gap bridging 0 um, keep every "
                                       "component** (F1 0.869, SSD 10.12)\n")
    _fresh(tmp_path, "shipped", [0.4, 0.5])
    _fresh(tmp_path, "chosen", [0.6, 0.8])
    text = checkpoint_choice_table(tmp_path, ["synthetic_cwmbs_weak"])
    lines = [x for x in text.splitlines() if x.startswith("| synthetic_cwmbs_weak")]
    assert len(lines) == 2 and "crops" in lines[0] and "**45.00**" in lines[0] and "| 40 50 |" in lines[0]
    assert "step000300" in lines[1] and "val F1 0.869" in lines[1] and "**70.00**" in lines[1]
    assert "| 66.94 | 74.94 |" in lines[1]  # target = paper 3D U-Net row - 8
    assert "SYNTHETIC" in text and (tmp_path / "summary.csv").exists()


def test_no_rows_or_an_unknown_preset_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no fresh-volume rows"):
        checkpoint_choice_table(tmp_path, ["synthetic_cwmbs_weak"])
    _fresh(tmp_path, "shipped", [0.4], protocol="full_volume")  # only the other protocol: still nothing to show
    with pytest.raises(InputError, match="no fresh-volume rows"):
        checkpoint_choice_table(tmp_path, ["synthetic_cwmbs_weak"])
    with pytest.raises(InputError, match="not a stand-in preset"):
        checkpoint_choice_table(tmp_path, ["synthetic_nope"])


def test_the_script_refuses_a_misspelt_step_before_training() -> None:
    done = subprocess.run(["bash", str(ROOT / "experiments" / "standins" / "run_checkpoint_choice.sh")],
                          env={"STEPS": "train chose", "PATH": "/usr/bin:/bin", "PY": "false", "NR": "false"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown step chose" in done.stderr


def test_the_script_chooses_among_every_snapshot_with_the_stand_ins_grid() -> None:
    """The choice must be made the way run.sh chooses the shipped threshold (same grid, flags, protocol)."""
    from neurorefiner.training.segmenter_cards import THRESHOLD_GRID

    script = (ROOT / "experiments" / "standins" / "run_checkpoint_choice.sh").read_text()
    step = script.split("      choose)", 1)[1].split(";;", 1)[0]
    assert tuple(float(t) for t in re.findall(r"--threshold (\S+)", step)) == THRESHOLD_GRID
    assert "--bridge 0 --keep 0" in step and "--protocol root_seeded" in step and "snapshots/step*.pt" in step
    assert "shipped=checkpoints/segmenters/$name.pt" in step and "300steps=$short" in step
