"""The Hydra entry points answer bad input as the ``neurorefiner`` commands do: one line, exit code 2, nothing
written (not Hydra's 17-line message, not a silently ignored typo, not a leftover log folder), and refine.py on an
all-zero mask writes its full set of outputs, unchanged, with a note."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from neurorefiner.io import read_swc, read_volume, write_volume
from tests.integration.test_refine_output_folder import one_error_line, refine_here

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def _script(tmp: Path, script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / script), *args, f"hydra.run.dir={tmp / 'run'}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp)


def _one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, err)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert all(w in err for w in words), err
    return err


def test_a_dataset_that_is_not_there_names_the_ones_that_are(tmp_path: Path) -> None:
    done = _script(tmp_path, "evaluate.py", "dataset=diadm")
    _one_line(done, "dataset=diadm", "diadem, ", "zbfwb", "closest: diadem")
    assert not (tmp_path / "run").exists()


def test_an_optional_group_takes_no_typo(tmp_path: Path) -> None:
    """``experiment`` is an optional group: Hydra ran the default evaluation for ``experiment=table_diadm``."""
    done = _script(tmp_path, "evaluate.py", "experiment=table_diadm", "--cfg", "job")
    _one_line(done, "experiment=table_diadm", "closest: table_diadem")


@pytest.mark.parametrize(("args", "problem"), [
    (["dataset=diadem", "experiment=table_6/adaln", "agent/vlm_model=internvl3_8b", "hydra/launcher=joblib",
      "limit=3", "+stage=1", "experiment=null", "-m", "--cfg", "job"], None),
    (["dataset=diadem,tiny,diadm"], "dataset=diadm"),
    (["+experiment=table_diadm"], "experiment=table_diadm"),
    (["dataset@other=nope"], "dataset=nope"),
    (["agent=vlm", "agent/vlm_model=qwen9"], "agent/vlm_model=qwen9"),
    (["dataset=["], "cannot read the override"),
])
def test_group_choices_are_read_from_conf(args: list[str], problem: str | None) -> None:
    from neurorefiner.cli.choices import first_bad_choice

    found = first_bad_choice(args, CONF)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def _evaluate_cfg(*overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="evaluate", overrides=["dataset=tiny", "methods=[gold_mask]", *overrides])


@pytest.mark.parametrize("limit", ["-1", "0", "two"])
def test_limit_is_a_whole_number_from_one(limit: str, capsys: pytest.CaptureFixture,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``limit=-1`` used to drop the last case without a word (``cases[:-1]``) and ``limit=0`` to run them all."""
    from neurorefiner.evaluation.entry import run

    def no_run(*_: object) -> list:
        raise AssertionError("evaluated with a bad limit")

    monkeypatch.setattr("neurorefiner.evaluation.runner.evaluate", no_run)
    with pytest.raises(SystemExit) as exc:
        run(_evaluate_cfg(f"limit={limit}"))
    assert f"limit={limit}" in one_error_line(capsys, 2, exc)


@pytest.mark.parametrize(("override", "words"), [
    ("methods=[]", "names no method"), ("cases=[]", "names no case"),
    ("protocols=[]", "protocols=[] names no protocol; name one or both of full_volume, root_seeded"),
    ("protocols=null", "protocols=null names no protocol; name one or both of full_volume, root_seeded"),
])
def test_an_empty_selection_is_refused(override: str, words: str, capsys: pytest.CaptureFixture,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``cases=[]`` ran every case (an empty list read as none given), ``methods=[]`` evaluated nothing,
    ``protocols=[]`` scored under full_volume only without a word."""
    from neurorefiner.evaluation.entry import run

    monkeypatch.setattr("neurorefiner.evaluation.runner.evaluate", lambda *_: [])
    with pytest.raises(SystemExit) as exc:
        run(_evaluate_cfg(override))
    assert words in one_error_line(capsys, 2, exc)


@pytest.mark.parametrize(("override", "words"), [("t_max=0", "t_max=0 must be a whole number >= 1"),
                                                 ("t_max=-1", "t_max=-1"), ("t_max=two", "t_max='two'"),
                                                 ("loop.block_size=0", "loop.block_size=0"),
                                                 ("loop.block_depth=0", "loop.block_depth=0"),
                                                 ("loop.editor_size=[32,64]", "loop.editor_size=[32, 64]"),
                                                 ("loop.halo=-2", "loop.halo=-2")])
def test_refine_loop_settings_are_checked_before_any_work(tmp_path: Path, override: str, words: str,
                                                          capsys: pytest.CaptureFixture) -> None:
    """``t_max=0`` was a ValueError traceback (exit 1); a block size of 0 or a negative halo went into the loop."""
    with pytest.raises(SystemExit) as exc:
        refine_here([f"image={tmp_path / 'missing.tif'}", f"mask={tmp_path / 'missing.tif'}",
                     f"out={tmp_path / 'o'}", "agent=heuristic", override])
    assert words in one_error_line(capsys, 2, exc)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("override", "words"), [
    ("method_registry.neurorefiner.t_max=0", "method_registry.neurorefiner.t_max=0 must be"),
    ("method_registry.neurorefiner.loop.block_size=0", "method_registry.neurorefiner.loop.block_size=0"),
    ("method_registry.neurorefiner.loop.halo=-1", "method_registry.neurorefiner.loop.halo=-1"),
    ("+method_registry.neurorefiner.loop.blok=1", "method_registry.neurorefiner.loop has no setting(s) ['blok']"),
])
def test_evaluate_loop_settings_are_checked_before_any_work(override: str, words: str, capsys: pytest.CaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``method_registry.neurorefiner.t_max=0`` ended in Hydra's InstantiationException traceback, after the
    initial masks were made."""
    from neurorefiner.evaluation.entry import run

    def no_dataset(*_: object, **__: object) -> None:
        raise AssertionError("a dataset was read with bad loop settings")

    monkeypatch.setattr("hydra.utils.instantiate", no_dataset)
    with pytest.raises(SystemExit) as exc:
        run(_evaluate_cfg("methods=[initial,neurorefiner]", override))
    assert words in one_error_line(capsys, 2, exc)


def test_a_failed_run_leaves_no_log_folder(tmp_path: Path) -> None:
    done = _script(tmp_path, "refine.py", f"image={tmp_path / 'missing.tif'}", f"mask={tmp_path / 'missing.tif'}",
                   f"out={tmp_path / 'o'}")
    _one_line(done, "missing.tif")
    assert not (tmp_path / "run").exists() and not (tmp_path / "o").exists()


def test_a_checkpoint_of_random_bytes_stops_refine_before_any_work(tmp_path: Path) -> None:
    """The editor loads on its first edit; a wrong ``editor.checkpoint`` stopped the run only then (or never)."""
    (tmp_path / "random.ckpt").write_bytes(np.random.default_rng(0).bytes(4096))
    img = write_volume(tmp_path / "img.tif", np.zeros((4, 8, 8), np.uint8), spacing=(1.0, 1.0, 1.0))
    msk = write_volume(tmp_path / "msk.tif", np.zeros((4, 8, 8), bool), spacing=(1.0, 1.0, 1.0))
    done = _script(tmp_path, "refine.py", f"image={img}", f"mask={msk}", f"out={tmp_path / 'o'}",
                   f"editor.checkpoint={tmp_path / 'random.ckpt'}")
    err = _one_line(done, "random.ckpt", "not a PyTorch")
    assert "Python objects" not in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "run").exists()


def test_an_all_zero_mask_gets_every_output_unchanged_with_a_note(tmp_path: Path, capsys) -> None:
    """It used to exit 0 with no output at all, and a pipeline waiting for refined_mask.tif broke."""
    img = write_volume(tmp_path / "img.tif", np.full((8, 32, 32), 30, np.uint8), spacing=(1.0, 0.5, 0.5))
    msk = write_volume(tmp_path / "msk.tif", np.zeros((8, 32, 32), bool), spacing=(1.0, 0.5, 0.5))
    out = tmp_path / "o"
    summary = refine_here([f"image={img}", f"mask={msk}", f"out={out}", "agent=heuristic", "progress=false"])
    assert "nothing to refine" in summary["note"] and "nothing to refine" in capsys.readouterr().out
    refined = read_volume(out / "refined_mask.tif")
    assert refined.shape == (8, 32, 32) and not refined.load().any() and refined.spacing == (1.0, 0.5, 0.5)
    assert len(read_swc(out / "refined_mask.swc").ids) == 0
    assert (out / "trace.jsonl").read_text().startswith('{"type":"run"')
    assert "nothing to refine" in (out / "report.html").read_text()
