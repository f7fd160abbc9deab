"""The review plugin on a folder written by the demo's refine config (``review_folder``): the napari dock
opens it and lists its escalations (headless), a saved review leaves a mask ``refine.py`` refines on from
and a trace ``refine.py`` still resumes, and the npe2 manifest is valid.

The napari test needs the ``viewer`` extra and OpenGL: napari draws through vispy, which Qt's ``offscreen``
platform cannot serve, so on a machine without a display it starts ``Xvfb`` (Debian: xvfb,
libgl1-mesa-dri) and skips, with the reason, where neither is there."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.integration.review_folder import EDITOR, make_run_folder


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run_folder(tmp_path_factory.mktemp("review"))


def test_a_saved_review_is_refined_on_and_the_run_still_resumes(run_folder: Path, tmp_path: Path, capsys) -> None:
    from neurorefiner.cli.demo import refine_cfg
    from neurorefiner.io import read_mask, read_volume
    from neurorefiner.refine.local import refine_volume
    from neurorefiner.review.folder import open_folder
    from neurorefiner.review.session import ReviewSession

    out = Path(shutil.copytree(run_folder, tmp_path / "run"))
    s = ReviewSession(open_folder(out))
    assert s.escalations and any(t.accepted for t in s.tries)
    s.decide(next(t.id for t in s.tries if t.accepted), "reject")
    saved = s.save()
    image = Path(s.folder.sources["image"])
    capsys.readouterr()
    cfg = refine_cfg(image, Path(s.folder.sources["mask"]), out, (1.0, 0.5, 0.5), extra=EDITOR)
    cfg.resume, cfg.overwrite = True, False
    refine_volume(read_volume(image), read_mask(Path(s.folder.sources["mask"])), cfg)   # the same run, again
    assert "resuming from" in capsys.readouterr().err
    assert saved.exists() and '"type":"review"' in (out / "trace.jsonl").read_text()
    summary = refine_volume(read_volume(image), read_mask(saved),
                            refine_cfg(image, saved, tmp_path / "next", (1.0, 0.5, 0.5), extra=EDITOR))
    assert summary["mask"] == str(saved) and (tmp_path / "next" / "refined_mask.tif").exists()


def _escalations_the_run_counted(folder: Path) -> int:
    from neurorefiner.agents.trace import read_trace

    return [r for r in read_trace(folder / "trace.jsonl", repair=False) if r.get("type") == "done"][-1][
        "counts"]["escalated"]


def test_make_demos_folder_lists_the_escalations_the_run_counted(project_root: Path) -> None:
    """On the real ``make demo`` output (outputs/demo, where it was run: minutes of CPU, so not here)."""
    from neurorefiner.review.folder import open_folder
    from neurorefiner.review.session import ReviewSession

    demo = project_root / "outputs" / "demo"
    if not (demo / "refined_mask.tif").exists():
        pytest.skip("make demo has not been run here (outputs/demo); the demo-config folder stands in above")
    s = ReviewSession(open_folder(demo))
    assert len(s.escalations) == _escalations_the_run_counted(demo)
    assert all(e.tries or e.notes for e in s.escalations)


def test_the_manifest_is_valid() -> None:
    npe2 = pytest.importorskip("npe2", reason="the viewer extra is not installed (pip install -e '.[viewer]')")
    pm = npe2.PluginManager.instance()
    pm.discover()
    manifest = pm.get_manifest("neurorefiner")
    assert [w.display_name for w in manifest.contributions.widgets] == ["Review"]
    for command in manifest.contributions.commands:
        module, name = command.python_name.split(":")
        assert callable(getattr(importlib.import_module(module), name)), command.id


def _die_with_parent() -> None:
    """In the Xvfb child: end when pytest ends (Linux prctl PR_SET_PDEATHSIG), not before. Qt's application
    object outlives every fixture and aborts the process if its X server goes first."""
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


@pytest.fixture(scope="session")
def display() -> None:
    """A display for Qt with OpenGL: the one there is, else a private Xvfb for the rest of the session,
    else skip."""
    if os.environ.get("DISPLAY") and os.environ.get("QT_QPA_PLATFORM", "xcb") == "xcb":
        return
    if shutil.which("Xvfb") is None:
        pytest.skip("no display and no Xvfb for napari's OpenGL (Debian: apt-get install xvfb libgl1-mesa-dri)")
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_die_with_parent)
    os.close(write)
    with os.fdopen(read) as fh:
        number = fh.readline().strip()
    if not number:
        proc.kill()
        pytest.skip("Xvfb did not start")
    os.environ["DISPLAY"], os.environ["QT_QPA_PLATFORM"] = f":{number}", "xcb"


def test_the_napari_plugin_opens_the_folder_and_lists_its_escalations(run_folder: Path, request) -> None:
    pytest.importorskip("napari", reason="the viewer extra is not installed (pip install -e '.[viewer]')")
    pytest.importorskip("pytestqt", reason="pytest-qt is not installed (the viewer extra)")
    request.getfixturevalue("display")
    from neurorefiner.review.layers import CORRECTION, EDITS, ESCALATIONS
    from neurorefiner.review.napari_widget import ReviewWidget, canvas_size

    make_napari_viewer = request.getfixturevalue("make_napari_viewer")
    try:
        viewer = make_napari_viewer()
    except Exception as exc:  # vispy without OpenGL: the viewer cannot draw at all
        pytest.skip(f"napari cannot start here (no OpenGL?): {type(exc).__name__}: {exc}")
    widget = ReviewWidget(viewer)
    viewer.window.add_dock_widget(widget)
    assert not widget.load(run_folder / "nope") and "no such folder" in widget.status.text()
    assert widget.load(run_folder)
    s = widget.session
    assert {EDITS, ESCALATIONS, CORRECTION, "image", "initial mask", "refined mask", "SWC (refined)"} <= \
        {layer.name for layer in viewer.layers}
    assert widget.escalation_list.count() == len(s.escalations) == _escalations_the_run_counted(run_folder) >= 1
    assert widget.escalation_list.item(0).text().startswith(f"block {s.escalations[0].block}: ")
    widget.escalation_list.setCurrentRow(0)                    # a click: the view goes there, the tries show
    e = s.escalations[0]
    assert np.allclose(viewer.camera.center[-2:], np.array(e.centre[1:]) * s.folder.spacing[1:])
    block = next(b for b in s.folder.blocks if b.id == e.block)
    shown = canvas_size(viewer) / viewer.camera.zoom            # world units (um) the view spans, y and x
    block_um = np.array(block.shape[1:]) * s.folder.spacing[1:]
    assert np.isclose(np.min(shown / block_um), 2.0), (shown, block_um)   # zoomed to the block and as much around
    assert "try 1" in widget.tries_text.toPlainText() and f"block {e.block}" in widget.tries_text.toPlainText()
    accepted = next(i for i, t in enumerate(s.tries) if t.accepted)
    widget.edit_list.setCurrentRow(accepted)
    before = int((viewer.layers[EDITS].data > 0).sum())
    widget.reject_button.click()
    assert int((viewer.layers[EDITS].data > 0).sum()) < before and "you: reject" in \
        widget.edit_list.item(accepted).text()
    viewer.layers[CORRECTION].data[0, 0, 0:2] = 1              # paint two voxels in
    path = widget.save()
    assert path is not None and path.exists() and "saved" in widget.status.text()
    assert reopened(run_folder).decisions == {s.tries[accepted].id: "reject"}


def reopened(folder: Path):  # type: ignore[no-untyped-def]
    from neurorefiner.review.folder import open_folder
    from neurorefiner.review.session import ReviewSession

    return ReviewSession(open_folder(folder))
