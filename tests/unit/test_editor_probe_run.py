"""``neurorefiner study probe-editor`` as steps (options, defects, edits, report): the command is a list of options
and one call, and each step is checked on a small volume with a stand-in network."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurorefiner.errors import InputError
from neurorefiner.inference.refiner import TopoRefiner
from neurorefiner.models.text_encoders import HashingEncoder
from neurorefiner.studies import editor_probe as ep
from neurorefiner.studies import editor_probe_real as real_defects
from neurorefiner.studies import editor_probe_run as run_module
from tests.unit.test_editor_probe import _KeepMask, lines_volume

GOOD = dict(kinds="break,noise", size="16,48,48", n=2, stacks="OP_1", crop_margin=16, synthetic="",
            synthetic_n=1, segmenter="unet3d", seed=0)


@pytest.mark.parametrize(("change", "words"), [
    ({"kinds": "break,gap"}, "--kinds"), ({"size": "4,48,48"}, "--size"), ({"n": 0}, "--n"),
    ({"stacks": "OP_1,OP_8"}, "held-out"), ({"crop_margin": -2}, "--crop-margin"),
])
def test_bad_options_are_refused_before_anything_is_loaded(change: dict, words: str) -> None:
    with pytest.raises(InputError, match=words):
        run_module.check_options(**{**GOOD, **change})


def test_a_run_writes_the_report_and_echoes_the_headline(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ep, "load_diadem", lambda names: [lines_volume()])
    monkeypatch.setattr(TopoRefiner, "load", classmethod(
        lambda cls, checkpoint=None, **kw: TopoRefiner(_KeepMask(), HashingEncoder(dim=16), **kw)))
    opts = run_module.check_options(**{**GOOD, "kinds": "break,real_break", "n": 1}, speed_threads=0)
    said: list[str] = []
    monkeypatch.setattr(real_defects, "load_segmenter_masks", lambda volumes, segmenter: {})
    paths = run_module.run(opts, tmp_path / "probe", "neurorefiner study probe-editor --n 2", said.append)
    assert {p.name for p in paths} >= {"editor_probe.md", "editor_probe.csv"} and all(p.exists() for p in paths)
    assert any("no cached unet3d masks" in s for s in said) and any("1 defects in 1 volumes" in s for s in said)
    report = (tmp_path / "probe" / "editor_probe.md").read_text()
    assert "neurorefiner study probe-editor --n 2" in report and "lines" in report


def test_the_command_refuses_held_out_stacks_in_one_line() -> None:
    from neurorefiner.cli.main import app

    result = CliRunner().invoke(app, ["study", "probe-editor", "--stacks", "OP_7", "--synthetic", ""])
    assert result.exit_code == 2 and "held-out" in result.output and "Traceback" not in result.output
