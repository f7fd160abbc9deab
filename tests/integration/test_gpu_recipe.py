"""The GPU recipe (scripts/gpu_train_toporefinenet.sh) end to end on CPU at a tiny setting: segmenter masks,
both stages' sample shards, stage 1 and stage 2 read from them, the evaluation, and a card per checkpoint in
$OUT. What the device run does, minus the GPU and the size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_recipe_runs_tiny_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "ACCEL": "cpu", "PRECISION": "32", "STEPS1": "2", "STEPS2": "2", "BATCH": "2",
           "CROP": "[16,32,32]", "WORKERS": "0", "N1": "8", "N2": "8", "NVAL": "4", "EVAL_N": "4",
           "DATASET": "tiny", "SEGMENTERS": "otsu", "SHARD_WORKERS": "2", "OUT": str(out),
           "SHARDS": str(tmp_path / "shards"), "INIT_MASKS": str(tmp_path / "init_masks"), "PY": sys.executable,
           "TIME1": "00:00:05:00", "TIME2": "00:00:05:00", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_train_toporefinenet.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    log = (out / "train.log").read_text() if (out / "train.log").exists() else run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    for name in ("toporefinenet_stage1.ckpt", "toporefinenet_stage2.ckpt", "toporefinenet_gpu.md",
                 "cards/toporefinenet_gpu.ckpt", "cards/toporefinenet_gpu.md"):
        assert (out / name).exists(), f"{name} missing; log:\n{log[-3000:]}"
    card = (out / "toporefinenet_gpu.md").read_text()
    assert "Stage 2: yes" in card and "stages.1.datamodule.shards=" in card
    for stage in (1, 2):
        assert (tmp_path / "shards" / f"stage{stage}" / "train" / "manifest.json").exists()
    # the CPU runs' findings: faint gaps in the stage-1 breaks, the instruction at every decoder level
    import json

    made = json.loads((tmp_path / "shards" / "stage1" / "train" / "settings.json").read_text())
    assert made["faint_gap"] == 0.5 and "model.net.text_film=true" in card


@pytest.mark.slow
def test_variant_recipe_trains_two_variants_side_by_side_on_cpu(tmp_path: Path) -> None:
    """scripts/gpu_train_editor_variants.sh: shards made once, the full model and the one-stage variant trained
    at once from them, and everything packed into the device tool's 8 files."""
    out = tmp_path / "out"
    env = {**os.environ, "SMOKE": "1", "VARIANTS": "cab one_stage", "OUT": str(out), "PY": sys.executable,
           "WORK": str(tmp_path / "work"), "INIT_MASKS": str(tmp_path / "init_masks"), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_train_editor_variants.sh")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["cab_stage1.ckpt", "cab_stage2.ckpt", "logs.tar.gz", "variants.md", "variants.tar.gz"], files
    report = (out / "variants.md").read_text()
    assert "## cab" in report and "## one_stage" in report and "(ONE_STAGE=1)" in report
    assert report.count("| toporefinenet_stage2 | correct |") == 2   # both evaluated
    import tarfile

    with tarfile.open(out / "variants.tar.gz") as tar:
        names = tar.getnames()
    assert "variants/one_stage/toporefinenet_stage2.ckpt" in names
    assert not any(n.startswith("variants/one_stage/toporefinenet_stage1") for n in names)  # no stage 1 ran
