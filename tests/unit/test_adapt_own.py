"""``neurorefiner adapt --dataset own`` as a new user runs it: a lab's stacks under
data/own/ get the shipped DIADEM U-Net's masks (or the masks already made for them), bad input is one line and exit
2 with nothing left behind, a failed start does not block a retry, a Ctrl-C says where the run stands and the editor
resumes from its last checkpoint, saying so; ``refiner=adapted`` without a refiner folder is one line.

Nothing trains here: the steps are monkeypatched fakes, the stacks empty files (listing cases reads no image)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurorefiner.adaptation import run as adapt_run
from neurorefiner.adaptation.settings import AdaptSettings
from neurorefiner.adaptation.state import AdaptFolder
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
STEP_NAMES = ("masks", "stage1_shards", "stage2_shards", "editor", "judge", "baselines")


def lay_out_own(data: Path, train: int, gold: bool = True) -> list[str]:
    """``data/own`` as data/README.md says: images/, swc/, splits.json (``train`` cases and one test case),
    spacing.json; returns the training cases' names."""
    own = data / "own"
    (own / "images").mkdir(parents=True)
    (own / "swc").mkdir()
    names = [f"OP_{k}" for k in range(1, train + 2)]
    for name in names:
        (own / "images" / f"{name}.tif").write_bytes(b"")
        if gold:
            (own / "swc" / f"{name}.swc").write_text("1 2 0 0 0 1 -1\n")
    (own / "splits.json").write_text(json.dumps({"train": names[:-1], "test": names[-1:]}))
    (own / "spacing.json").write_text(json.dumps({"spacing": [1.0, 0.33, 0.33]}))
    return names[:-1]


@pytest.fixture()
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder of the user's own (and its cache beside it), the checkout's checkpoints as shipped."""
    monkeypatch.setenv("NEUROREFINER_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("NEUROREFINER_CACHE", raising=False)
    (tmp_path / "data").mkdir()
    return tmp_path / "data"


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every step a fake that records its name: nothing trains, nothing is segmented."""
    import neurorefiner.adaptation.steps as steps

    made: list[str] = []
    monkeypatch.setattr(steps, "PRODUCTS", {})
    monkeypatch.setattr(steps, "STEPS", fake_steps(made))
    return made


def fake_steps(calls: list[str], fail: str | None = None, error: type[BaseException] = RuntimeError) -> dict:
    def make(name: str):  # type: ignore[no-untyped-def]
        def step(settings: AdaptSettings, folder: AdaptFolder) -> dict:
            calls.append(name)
            if name == fail:
                raise error("stopped")
            return {"made": name}
        return step
    return {name: make(name) for name in STEP_NAMES}


def one_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    return lines[0]


# ------------------------------------------------------------------------------------------------ bad input


def test_a_dataset_too_small_to_choose_on_is_one_line_before_any_work(data: Path, tmp_path: Path,
                                                                      calls: list[str]) -> None:
    lay_out_own(data, train=2)
    result = CliRunner().invoke(app, ["adapt", "--dataset", "own", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    line = one_line(result.output)
    assert "too small to choose on" in line and "2 stack(s) with gold SWC" in line and "at least 3" in line
    assert calls == [] and not (tmp_path / "r").exists()


def test_own_stacks_without_gold_are_one_line_naming_the_files_and_leave_nothing(data: Path, tmp_path: Path,
                                                                                 calls: list[str]) -> None:
    lay_out_own(data, train=3, gold=False)
    result = CliRunner().invoke(app, ["adapt", "--dataset", "own", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    line = one_line(result.output)
    assert "no gold SWC for 3 of the 3 stacks" in line and "OP_1.swc, OP_2.swc, OP_3.swc" in line
    assert str(data / "own" / "swc") in line and "OP_4" not in line  # the test case is never read
    assert calls == [] and not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------------------------ the masks


def test_own_stacks_are_segmented_by_the_shipped_diadem_unet_by_default(data: Path) -> None:
    from neurorefiner.inference.init_masks import _learned_segmenter, shipped_checkpoint

    lay_out_own(data, train=3)
    ckpt, _, seg, _ = _learned_segmenter("own", "unet3d", None, None, None, None)
    assert ckpt == shipped_checkpoint("unet3d", "diadem") and seg is not None


def test_the_readme_command_passes_its_checks_on_own_stacks(data: Path, tmp_path: Path, calls: list[str]) -> None:
    lay_out_own(data, train=3)
    result = CliRunner().invoke(app, ["adapt", "--dataset", "own", "--out", str(tmp_path / "my_refiner")])
    assert result.exit_code == 0, result.output
    assert calls == list(STEP_NAMES)


def test_masks_made_by_init_masks_for_own_stacks_are_the_ones_used(data: Path, tmp_path: Path) -> None:
    """`neurorefiner init-masks --dataset own --model mine.pt` filled the cache: adapt (and the judge, which asks by
    the segmenter's name) read those masks instead of making others with the DIADEM U-Net over them."""
    import shutil

    from neurorefiner.inference.init_masks import _learned_segmenter, default_checkpoint, shipped_checkpoint

    lay_out_own(data, train=3)
    mine = tmp_path / "mine.pt"
    shutil.copyfile(shipped_checkpoint("unet3d", "diadem"), mine)
    cache = data / "cache" / "init_masks" / "own" / "unet3d"
    cache.mkdir(parents=True)
    (cache / "manifest.json").write_text(json.dumps({"checkpoint": str(mine), "cases": {}}))
    assert default_checkpoint("unet3d", "own") == mine
    assert _learned_segmenter("own", "unet3d", None, None, None, None)[0] == mine
    assert default_checkpoint("unet3d", "diadem") == shipped_checkpoint("unet3d", "diadem")  # shipped ones first


def test_a_labs_own_segmenters_masks_put_in_the_cache_are_used(data: Path) -> None:
    """data/README.md: put your segmenter's masks under data/cache/init_masks/own/<name>/ and pass --segmenters."""
    from neurorefiner.inference.init_masks import write_init_masks

    names = lay_out_own(data, train=3)
    cache = data / "cache" / "init_masks" / "own" / "mine"
    cache.mkdir(parents=True)
    for name in names:
        (cache / f"{name}.tif").write_bytes(b"")
    assert write_init_masks("own", "mine", None, "train", progress=False) == [cache / f"{n}.tif" for n in names]


def test_a_segmenter_with_no_checkpoint_and_no_masks_is_one_line_before_the_folder_is_claimed(
        data: Path, tmp_path: Path, calls: list[str]) -> None:
    lay_out_own(data, train=3)
    result = CliRunner().invoke(app, ["adapt", "--dataset", "own", "--out", str(tmp_path / "r"),
                                      "--segmenters", "mine"])
    assert result.exit_code == 2
    line = one_line(result.output)
    assert "--segmenters mine: no checkpoint makes its masks of own" in line and "init-masks --dataset own" in line
    assert calls == [] and not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------------------------ retries


def test_a_run_that_finished_no_step_does_not_block_a_retry_with_other_settings(
        data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import neurorefiner.adaptation.steps as steps

    lay_out_own(data, train=3)
    calls: list[str] = []
    monkeypatch.setattr(steps, "PRODUCTS", {})
    monkeypatch.setattr(steps, "STEPS", fake_steps(calls, fail="masks"))
    out = tmp_path / "r"
    with pytest.raises(RuntimeError):
        adapt_run.adapt(AdaptSettings("own"), out, progress=False)
    (out / "work" / "shards").mkdir(parents=True)  # half-made under the first settings
    monkeypatch.setattr(steps, "STEPS", fake_steps(calls))
    adapt_run.adapt(AdaptSettings("own", editor_steps=10), out, progress=False)
    record = json.loads((out / "adapt.json").read_text())
    assert record["settings"]["editor_steps"] == 10 and list(record["steps"]) == list(STEP_NAMES)
    assert not (out / "work").exists()
    err = capsys.readouterr().err
    assert "finished no step; starting afresh" in err and "editor_steps 1500" in err
    with pytest.raises(InputError, match="editor_steps: 10 here, 1500 asked"):  # finished steps: still refused
        adapt_run.adapt(AdaptSettings("own"), out, progress=False)


def test_a_ctrl_c_says_which_step_stopped_and_that_the_same_command_resumes(
        data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import neurorefiner.adaptation.steps as steps

    lay_out_own(data, train=3)
    calls: list[str] = []
    monkeypatch.setattr(steps, "PRODUCTS", {})
    monkeypatch.setattr(steps, "STEPS", fake_steps(calls, fail="editor", error=KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        adapt_run.adapt(AdaptSettings("own"), tmp_path / "r", progress=False)
    lines = [x for x in capsys.readouterr().err.splitlines() if "stopped" in x]
    assert len(lines) == 1 and "stopped during the editor step" in lines[0]
    assert "run the same command again to resume" in lines[0] and "last checkpoint" in lines[0]


def test_the_editor_step_resumes_from_its_last_checkpoint_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import torch

    import neurorefiner.adaptation.steps as steps

    folder = AdaptFolder(tmp_path / "r")
    last = steps.editor_run_dir(folder) / "last.ckpt"
    last.parent.mkdir(parents=True)
    torch.save({"global_step": 420}, last)

    def fake_train(command: list[str], made: Path, what: str, again: str) -> None:
        made.write_bytes(b"weights")
        made.with_suffix(".json").write_text(json.dumps({"train/steps": 1500}))

    monkeypatch.setattr(steps, "_train", fake_train)
    steps.train_editor(AdaptSettings("tiny"), folder)
    err = capsys.readouterr().err
    assert f"the editor resumes from its last checkpoint at step 420 of 1500 ({last})" in err


def test_the_editor_steps_run_folder_is_where_its_training_keeps_last_ckpt(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    import neurorefiner.adaptation.steps as steps
    from neurorefiner.training.refiner import run_state_dir

    folder = AdaptFolder(tmp_path / "r")
    command = steps.editor_command(AdaptSettings("tiny"), folder)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="train", overrides=command[2:])
    assert run_state_dir(cfg) == steps.editor_run_dir(folder).resolve()


def test_a_stopped_editor_run_saves_its_state_where_the_same_command_resumes(tmp_path: Path) -> None:
    from neurorefiner.training.progress import SaveOnInterrupt

    class Trainer:
        world_size, global_step = 1, 7

        def save_checkpoint(self, path: str, weights_only: bool = False) -> None:
            Path(path).write_text("state")

    last = tmp_path / "run" / "last.ckpt"
    SaveOnInterrupt(last).on_exception(Trainer(), None, ValueError("a bug"))  # type: ignore[arg-type]
    assert not last.exists()  # an error's state is not one to resume from
    SaveOnInterrupt(last).on_exception(Trainer(), None, KeyboardInterrupt())  # type: ignore[arg-type]
    assert last.read_text() == "state"


def test_a_ctrl_c_gives_the_training_run_time_to_save_before_adapt_stops(tmp_path: Path) -> None:
    """Ctrl-C reaches adapt and its training run at once; subprocess.run killed the run a quarter second later,
    before its state was written."""
    saved = tmp_path / "saved"
    run = textwrap.dedent(f"""
        import pathlib, time
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            time.sleep(1.0)
            pathlib.Path({str(saved)!r}).write_text("state")
            raise SystemExit(1)
    """)
    adapt = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from neurorefiner.adaptation.steps import _train
        try:
            _train(["python", "-c", {run!r}], Path({str(tmp_path / 'made')!r}), "the run", "resume it")
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", adapt], cwd=ROOT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3.0)  # both started (the import of the adaptation package included)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    assert proc.wait(timeout=30) == 130
    assert saved.read_text() == "state"


# ------------------------------------------------------------------------------------------------ refine.py


def refine_here(overrides: list[str]) -> None:
    from hydra import compose, initialize_config_dir

    from neurorefiner.refine.entry import run

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="refine", overrides=[*overrides, "image=a.tif", "mask=b.tif",
                                                       "paths.output_dir=/tmp/nr-unused"])
    run(cfg)


def test_refiner_adapted_without_refiner_dir_is_one_line_naming_what_to_set(capsys: pytest.CaptureFixture,
                                                                            tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        refine_here(["refiner=adapted", f"out={tmp_path / 'out'}"])
    assert stopped.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert "refiner=adapted needs refiner_dir=<folder>" in line and "neurorefiner adapt --dataset NAME" in line


def test_an_empty_refiner_dir_is_not_a_refiner_folder(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as stopped:
        refine_here(["refiner=adapted", f"refiner_dir={empty}", f"out={tmp_path / 'out'}"])
    assert stopped.value.code == 2
    line = one_line(capsys.readouterr().err)
    assert f"{empty}: refiner_dir= is not a refiner folder" in line and "editor.ckpt" in line
    assert f"neurorefiner adapt --dataset NAME --out {empty}" in line and "not found" not in line


def test_a_shipped_refiner_folder_passes(tmp_path: Path) -> None:
    from neurorefiner.adaptation.state import check_refiner_dir

    assert check_refiner_dir(ROOT / "checkpoints" / "refiners" / "synthetic_zbfwb").is_dir()
