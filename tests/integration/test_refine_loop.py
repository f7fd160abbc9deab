"""refine.py end to end: outputs, the shipped editor, empty input, kill -9 and resume, every agent config."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from neurorefiner.io import read_swc, read_volume, write_volume
from neurorefiner.topology.blocks import betti0
from neurorefiner.topology.instructions import parse_instruction

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def slow_editor(delay: float = 0.4, **_: object):  # type: ignore[no-untyped-def]
    """A deterministic stand-in editor that takes its time (so a run can be killed mid-way)."""

    class Slow:
        def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
            time.sleep(delay)
            ins = parse_instruction(instruction)
            out = np.asarray(mask_block, bool).copy()
            region = ins.region(out.shape)
            if ins.op == "remove":
                out[region] = False
            else:
                out[region & (image_block > 0.5)] = True
            return out

    return Slow()


def synthetic(tmp: Path, n_blocks: int = 1) -> tuple[Path, Path]:
    """Tubes with a short break each (one per 64-wide block) and a speck, on a noisy background."""
    shape = (32, 64, 64 * n_blocks)
    rng = np.random.default_rng(0)
    img = np.clip(rng.normal(12, 4, shape), 0, 255)
    m = np.zeros(shape, bool)
    for b in range(n_blocks):
        x0 = 64 * b
        m[15:18, 30:33, x0 + 2: x0 + 62] = True
        img[15:18, 30:33, x0 + 2: x0 + 62] = 200
        m[15:18, 30:33, x0 + 28: x0 + 35] = False
    m[4:6, 50:52, 10:12] = True
    img[4:6, 50:52, 10:12] = 60
    image = write_volume(tmp / "img.tif", img.astype(np.uint8), spacing=(1.0, 0.5, 0.5))
    mask = write_volume(tmp / "msk.tif", m, spacing=(1.0, 0.5, 0.5))
    return image, mask


def refine(args: list[str], tmp: Path, **kw) -> subprocess.CompletedProcess:  # type: ignore[no-untyped-def]
    env = kw.pop("env", None) or {**os.environ, "WANDB_MODE": "offline", "PROJECT_ROOT": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "refine.py"), *args, f"hydra.run.dir={tmp / 'run'}",
                           "progress=false"], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT, **kw)


@pytest.mark.parametrize("overrides", [[], ["agent=vlm"], ["agent=vlm", "agent/vlm_model=internvl3_8b"],
                                       ["agent=vlm", "agent.fallback=heuristic"],
                                       ["agent=replay", "agent.trace=/tmp/x.jsonl"],
                                       ["loop.roles=none", "loop.inspector_inputs=[global_mip]"]])
def test_every_agent_config_composes_and_builds(overrides: list[str]) -> None:
    from neurorefiner.refine.run import RefineRun

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="refine", overrides=["image=a.tif", "mask=b.tif", "out=/tmp/o", *overrides,
                                                       "paths.output_dir=/tmp/nr-test-out"])
    run = RefineRun.from_config(cfg)
    agents, described = run.agents, run.description["agent"]
    assert run.settings.t_max == 5
    if "agent/vlm_model=internvl3_8b" in overrides:
        assert agents.inspector.client.model == "OpenGVLab/InternVL3-8B"
    assert "NEUROREFINER_VLM_API_KEY" not in json.dumps(described)


def test_empty_mask_is_nothing_to_refine(tmp_path: Path) -> None:
    img = write_volume(tmp_path / "img.tif", np.zeros((4, 8, 8), np.uint8))
    msk = write_volume(tmp_path / "msk.tif", np.zeros((4, 8, 8), bool))
    out = refine([f"image={img}", f"mask={msk}", f"out={tmp_path / 'o'}"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "nothing to refine" in out.stdout


@pytest.mark.slow
def test_refine_end_to_end_with_the_shipped_editor(tmp_path: Path) -> None:
    image, mask = synthetic(tmp_path)
    out_dir = tmp_path / "o"
    out = refine([f"image={image}", f"mask={mask}", f"out={out_dir}"], tmp_path)
    assert out.returncode == 0, out.stderr
    refined = read_volume(out_dir / "refined_mask.tif")
    assert refined.spacing == (1.0, 0.5, 0.5)
    before = read_volume(mask).load() > 0
    after = refined.load() > 0
    assert betti0(after) < betti0(before)
    assert len(read_swc(out_dir / "refined_mask.swc")) > 0
    records = [json.loads(line) for line in (out_dir / "trace.jsonl").read_text().splitlines()]
    assert records[0]["type"] == "run" and records[-1]["type"] == "done"
    roles = {r["role"] for r in records if r["type"] == "decision"}
    assert roles == {"inspector", "advisor", "editor", "validator"}
    report = (out_dir / "report.html").read_text()
    assert "data:image/png;base64," in report and "Escalated" in report


@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_result(tmp_path: Path) -> None:
    image, mask = synthetic(tmp_path, n_blocks=4)
    common = [f"image={image}", f"mask={mask}", "loop.block_size=64", "agent=heuristic",   # flags every block
              "editor._target_=tests.integration.test_refine_loop.slow_editor"]
    whole = refine([*common, f"out={tmp_path / 'whole'}"], tmp_path)
    assert whole.returncode == 0, whole.stderr

    out_dir = tmp_path / "cut"
    env = {**os.environ, "WANDB_MODE": "offline", "PROJECT_ROOT": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "refine.py"), *common, f"out={out_dir}",
                             f"hydra.run.dir={tmp_path / 'run2'}", "progress=false"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    trace = out_dir / "trace.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline:
        if trace.exists() and trace.read_text().count('"block_done"') >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = trace.read_text().count('"block_done"')
    assert 2 <= finished < 4 and not (out_dir / "refined_mask.tif").exists()

    again = refine([*common, f"out={out_dir}"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"{finished} finished block(s) taken from it" in again.stderr
    a = read_volume(tmp_path / "whole" / "refined_mask.tif").load()
    b = read_volume(out_dir / "refined_mask.tif").load()
    assert (a == b).all()
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    done = [(r["round"], r["block"]) for r in records if r["type"] == "block_done"]
    assert len(done) == len(set(done))          # no finished block was redone


@pytest.mark.slow
def test_server_down_with_fallback_and_the_key_is_nowhere_in_the_outputs(tmp_path: Path) -> None:
    image, mask = synthetic(tmp_path)
    key = "sk-never-write-me-0001"
    env_key = {"NEUROREFINER_VLM_API_KEY": key}
    out_dir = tmp_path / "o"
    out = refine([f"image={image}", f"mask={mask}", f"out={out_dir}", "agent=vlm", "agent.fallback=heuristic",
                  "agent.base_url=http://127.0.0.1:9/v1", "agent.client.max_retries=0",
                  "editor._target_=tests.integration.test_refine_loop.slow_editor", "+editor.delay=0"],
                 tmp_path, env={**os.environ, "WANDB_MODE": "offline", "PROJECT_ROOT": str(ROOT), **env_key})
    assert out.returncode == 0, out.stderr
    trace = (out_dir / "trace.jsonl").read_text()
    assert "fallback to heuristic" in trace
    for path in [*out_dir.rglob("*"), *(tmp_path / "run").rglob("*")]:
        if path.is_file():
            assert key not in path.read_text(errors="ignore"), path
    assert key not in out.stdout + out.stderr


def test_server_down_without_fallback_is_a_clear_error(tmp_path: Path) -> None:
    image, mask = synthetic(tmp_path)
    out = refine([f"image={image}", f"mask={mask}", f"out={tmp_path / 'o'}", "agent=vlm",
                  "agent.base_url=http://127.0.0.1:9/v1", "agent.client.max_retries=0"], tmp_path)
    assert out.returncode == 2
    assert "did not answer" in out.stderr and "resume" in out.stderr and "Traceback" not in out.stderr
    assert (tmp_path / "o" / "trace.jsonl").exists()
