"""experiments/segmenters/run_synthetic.sh takes every segmenter of conf/model (all eight networks get synthetic
rows), refuses anything else before it starts work, keeps each variant's and seed's files apart, and scores
outside the per-preset lock that guards the merge."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "segmenters" / "run_synthetic.sh"
SEGMENTERS = ("unet3d", "vnet", "unetr", "swinunetr", "nnunet_style", "sgsnet_style", "gbpnet_style",
              "adtlnet_style")


def _run(arch: str, step: str, py: str = "false", presets: str = "synthetic_cwmbs_noise"
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARCH": arch, "STEP": step, "PRESETS": presets, "PY": py, "NR": py}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("arch", SEGMENTERS)
def test_every_segmenter_is_accepted(arch):
    assert (ROOT / "conf" / "model" / f"{arch}.yaml").exists()
    done = _run(arch, "no_such_step")
    assert done.returncode == 2 and "unknown STEP=no_such_step" in done.stderr  # got past the ARCH check


def test_an_unknown_network_is_refused():
    done = _run("resnet", "train")
    assert done.returncode == 2 and "ARCH=resnet: not a segmenter" in done.stderr


# what `neurorefiner make segmenter-card CK --out CARD ...` leaves: the card
WRITE_CARD = ('args=("$@"); if [ "$1 $2" = "make segmenter-card" ]; then for i in "${!args[@]}"; do '
              '[ "${args[$i]}" = --out ] && echo card > "${args[$((i + 1))]}"; done; fi; true')


def _stub(tmp_path: Path, body: str = "") -> tuple[Path, Path]:
    """A stand-in for the Python interpreter and the neurorefiner command that logs each call's arguments
    (one line per call) and writes the card a card command names."""
    log = tmp_path / "calls.txt"
    stub = tmp_path / "py"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n{WRITE_CARD}\n{body}\n')
    stub.chmod(0o755)
    return stub, log


@pytest.mark.parametrize("step", ["eval", "floor"])
def test_scoring_runs_outside_the_lock_and_only_the_merge_holds_it(tmp_path, step):
    """Two lanes score one preset at once (a lock over the whole scoring run left one core idle); the merge into
    the preset's table still holds the lock, this run's rows first."""
    tables = tmp_path / "tables"
    tables.mkdir()
    lock = tables / ".synthetic_x.lock"
    probe = (f'flock -n {lock} true 2>/dev/null && echo "lock free" >> {tmp_path}/calls.txt '
             f'|| echo "lock held" >> {tmp_path}/calls.txt')
    stub, log = _stub(tmp_path, probe)
    (tables / "synthetic_x_test_cases.csv").write_text("old rows\n")
    (tables / "synthetic_x_vnet_postprocess_val.json").write_text("{}\n")  # STEP=choose ran
    env = {**os.environ, "ARCH": "vnet", "STEP": step, "PRESETS": "synthetic_x", "PY": str(stub), "NR": str(stub),
           "TABLES": str(tables)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    rows_calls = [i for i, c in enumerate(calls) if c.startswith("make segmenter-rows")]
    score, merge = rows_calls
    assert calls[score + 1] == "lock free" and f"--out {tables}" not in calls[score]
    scratch = calls[score].split("--out ")[1].split()[0]
    assert calls[merge + 1] == "lock held"
    assert f"--include {scratch}/rows_cases.csv --include {tables}/synthetic_x_test_cases.csv" in calls[merge]
    assert f"--out {tables}" in calls[merge] and "--segmenter" not in calls[merge]
    assert not Path(scratch).exists()  # the scratch table is removed after the merge


def test_a_misspelt_step_in_a_list_is_refused_before_any_step_runs():
    done = _run("unet3d", "train no_such_step")  # PY=false: had train run first, it would exit 1
    assert done.returncode == 2 and "unknown STEP=no_such_step" in done.stderr


def test_a_list_of_steps_runs_in_order_per_preset(tmp_path):
    stub, log = _stub(tmp_path)
    done = _run("vnet", "train choose", py=str(stub), presets="synthetic_cwmbs_weak synthetic_zbfwb")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    scripts = [" ".join(c.split()[:2]) if c.startswith(("study ", "make ")) else c.split()[0] for c in calls]
    assert scripts == ["train.py", "make postprocess"] * 2
    assert "dataset=synthetic_cwmbs_weak" in calls[0] and "--dataset synthetic_zbfwb" in calls[3]
    assert "model=vnet" in calls[0]


def test_the_prior_variant_trains_with_the_prior_and_keeps_its_own_files(tmp_path):
    """PRIOR=0.02: the foreground-prior run must neither overwrite the plain network's checkpoint, val choice
    and card nor merge its rows under the plain network's label."""
    tables = tmp_path / "tables"
    tables.mkdir()
    stub, log = _stub(tmp_path, f'case "$*" in "make postprocess"*) echo {{}} > '
                                f'{tables}/synthetic_x_gbpnet_style_prior_postprocess_val.json ;; esac')
    env = {**os.environ, "ARCH": "gbpnet_style", "PRIOR": "0.02", "STEP": "train choose eval",
           "PRESETS": "synthetic_x", "PY": str(stub), "NR": str(stub), "TABLES": str(tables)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    ck = "checkpoints/runs/segment/gbpnet_style/synthetic_x_prior/segmenter.pt"
    train = next(c for c in calls if c.startswith("train.py"))
    assert "model=gbpnet_style" in train and "segmentation.module.foreground_prior=0.02" in train
    assert f"segmentation.ckpt_dir={Path(ck).parent}" in train
    choose = next(c for c in calls if c.startswith("make postprocess"))
    assert "--arch gbpnet_style --name gbpnet_style_prior" in choose and f"--model {ck}" in choose
    assert f"--out {tables}" in choose
    score = next(c for c in calls if c.startswith("make segmenter-rows") and "--segmenter" in c)
    assert f"--segmenter gbpnet_style:prior={ck}" in score
    card = tables / "synthetic_x_gbpnet_style_prior_card.md"
    assert card.exists() and not (tables / "synthetic_x_gbpnet_style_card.md").exists()


def test_without_prior_the_files_keep_their_old_names(tmp_path):
    stub, log = _stub(tmp_path)
    done = _run("gbpnet_style", "train choose", py=str(stub), presets="synthetic_x")
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert "foreground_prior" not in calls[0]
    assert "segmentation.ckpt_dir=checkpoints/runs/segment/gbpnet_style/synthetic_x " in calls[0] + " "
    assert "--name gbpnet_style " in calls[1] + " "


@pytest.mark.parametrize("step", ["eval", "floor"])
def test_a_failed_scoring_run_leaves_no_scratch_table_behind(tmp_path, step):
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    stub, log = _stub(tmp_path, 'case "$*" in "make segmenter-rows"*) exit 3 ;; esac')
    (tmp_path / "synthetic_x_vnet_postprocess_val.json").write_text("{}\n")
    env = {**os.environ, "ARCH": "vnet", "STEP": step, "PRESETS": "synthetic_x", "PY": str(stub), "NR": str(stub),
           "TABLES": str(tmp_path), "TMPDIR": str(scratch_root)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3  # the failure still fails the run
    assert "segmenter-rows" in log.read_text()  # it got as far as scoring
    assert list(scratch_root.iterdir()) == []


def test_another_seed_trains_with_it_keeps_its_own_files_and_is_never_scored_on_test(tmp_path):
    """SEED=1: a second seed of the plain or prior recipe for the val comparison (experiments/segmenters/
    prior_compare_*) must not overwrite the seed-0 run's checkpoint, val choice or card."""
    tables = tmp_path / "tables"
    tables.mkdir()
    stub, log = _stub(tmp_path)
    env = {**os.environ, "ARCH": "vnet", "SEED": "1", "PRIOR": "0.01", "STEP": "train choose card",
           "PRESETS": "synthetic_x", "PY": str(stub), "NR": str(stub), "TABLES": str(tables)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    train, choose, card = log.read_text().splitlines()
    ck = "checkpoints/runs/segment/vnet/synthetic_x_seed1_prior/segmenter.pt"
    assert "seed=1" in train.split() and "segmentation.module.foreground_prior=0.01" in train
    assert f"segmentation.ckpt_dir={Path(ck).parent}" in train
    assert "--name vnet_seed1_prior" in choose and f"--model {ck}" in choose
    assert "SEED=1 PRIOR=0.01 ARCH=vnet STEP=train" in card and "vnet:prior seed 1 on synthetic_x" in card
    assert (tables / "synthetic_x_vnet_seed1_prior_card.md").exists()
    assert sorted(p.name for p in tables.iterdir()) == ["synthetic_x_vnet_seed1_prior_card.md"]

    env["PRIOR"] = ""
    log.unlink()
    done = subprocess.run(["bash", str(SCRIPT)], env={**env, "STEP": "train"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "segmentation.ckpt_dir=checkpoints/runs/segment/vnet/synthetic_x_seed1 " in log.read_text()


@pytest.mark.parametrize("step", ["eval", "floor", "train eval"])
def test_another_seed_is_refused_on_test_before_any_step_runs(step):
    env = {**os.environ, "ARCH": "vnet", "SEED": "1", "STEP": step, "PRESETS": "synthetic_x", "PY": "false"}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "extra seeds are scored on the val split only" in done.stderr


def test_a_seed_that_is_not_a_number_is_refused():
    env = {**os.environ, "ARCH": "vnet", "SEED": "one", "STEP": "train", "PRESETS": "synthetic_x", "PY": "false"}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "SEED=one: not a whole number" in done.stderr


@pytest.mark.parametrize("seed", ["0", "00"])
def test_seed_zero_is_refused_because_it_is_the_recipes_own_run(seed):
    """The recipe's run (seed 0) carries no seed in its file names (the prior comparison read it as seed 0): a SEED=0
    run would write a second, unread copy under another name."""
    env = {**os.environ, "ARCH": "vnet", "SEED": seed, "STEP": "train", "PRESETS": "synthetic_x", "PY": "false"}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is the recipe's own seed" in done.stderr


def test_eval_without_a_chosen_post_processing_is_refused(tmp_path):
    stub, log = _stub(tmp_path)
    env = {**os.environ, "ARCH": "vnet", "STEP": "eval", "PRESETS": "synthetic_x", "PY": str(stub), "NR": str(stub),
           "TABLES": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "run STEP=choose first" in done.stderr
    assert not log.exists()  # nothing was scored
