"""The review's logic without Qt or a refine run: a trace written by hand (one accepted join in block 0, one
rejected removal in block 1 that was escalated with no anchors, as a VLM Inspector leaves it), a person's
decisions and paint, the saved mask and the ``review`` record, and the errors for folders that are not a
refine run's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.agents.trace import encode_mask, read_trace
from neurorefiner.errors import InputError
from neurorefiner.io import read_mask, write_volume
from neurorefiner.review.folder import open_folder
from neurorefiner.review.records import ADD, REMOVE
from neurorefiner.review.session import ReviewSession

SHAPE = (8, 16, 32)


def _decisions(rnd: int, block: int, defect: int, window: list, before: np.ndarray, after: np.ndarray,
               accept: bool, instruction: str) -> list[dict]:
    base = {"type": "decision", "round": rnd, "block": block, "defect": defect, "attempt": 0, "backend": "test"}
    return [{**base, "role": "advisor", "decision": {"instruction": instruction, "reason": "looked at it"}},
            {**base, "role": "editor", "window": window, "before": encode_mask(before), "after": encode_mask(after),
             "decision": {"instruction": instruction, "added": int((after & ~before).sum()),
                          "removed": int((before & ~after).sum())}},
            {**base, "role": "validator", "decision": {"accept": accept, "reason": "ok" if accept else "too wide"}}]


def write_run(tmp: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A run folder by hand; returns it, the initial mask and the refined mask."""
    image = np.zeros(SHAPE, np.uint8)
    initial = np.zeros(SHAPE, bool)
    initial[4, 8, 1:6] = initial[4, 8, 9:15] = True       # a break at x 6-8 in block 0
    initial[2, 3, 20] = True                               # a speck in block 1
    image[initial] = 200
    refined = initial.copy()
    refined[4, 8, 6:9] = True                              # the accepted join
    write_volume(tmp / "img.tif", image)
    write_volume(tmp / "msk.tif", initial)
    out = tmp / "run"
    out.mkdir()
    write_volume(out / "refined_mask.tif", refined)
    w0 = [[0, 8], [0, 16], [0, 16]]
    w1 = [[0, 8], [0, 16], [16, 32]]
    speck_gone = initial[:, :, 16:].copy()
    speck_gone[2, 3, 4] = False
    records = [{"type": "run", "settings": {"block_size": 16, "block_depth": None},
                "inputs": {"image": str(tmp / "img.tif"), "mask": str(tmp / "msk.tif")}},
               *_decisions(0, 0, 0, w0, initial[:, :, :16], refined[:, :, :16], True, "Connect at a to b"),
               *_decisions(0, 1, 0, w1, initial[:, :, 16:], speck_gone, False, "Remove isolated noise at c"),
               {"type": "decision", "round": 0, "block": 1, "defect": 0, "attempt": 1, "role": "advisor",
                "decision": None, "unreadable": "no position named"},     # a VLM answer outside the grammar
               {"type": "block_done", "round": 0, "block": 0, "outcome": {"statuses": [
                   {"defect": 0, "key": "FN:4,8,5;4,8,9", "kind": "FN", "status": "fixed", "attempts": 1}]}},
               {"type": "block_done", "round": 0, "block": 1, "outcome": {"statuses": [
                   {"defect": 0, "key": "FP:", "kind": "FP", "status": "escalated", "attempts": 1,
                    "reason": "1 tries rejected", "instruction": "Remove isolated noise at c"}]}}]
    (out / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out, initial, refined


@pytest.fixture()
def run(tmp_path: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    return write_run(tmp_path)


def test_tries_and_escalations_come_from_the_trace(run) -> None:
    out, _, _ = run
    s = ReviewSession(open_folder(out))
    assert [(t.id, t.accepted, t.added, t.removed) for t in s.tries] == [("r1-b0-d0-t1", True, 3, 0),
                                                                        ("r1-b1-d0-t1", False, 0, 1)]
    [e] = s.escalations
    assert (e.block, e.kind, e.located_by) == (1, "FP", "edit windows tried")   # no anchors: the window's centre
    assert e.centre == (3.5, 7.5, 23.5) and [t.id for t in e.tries] == ["r1-b1-d0-t1"]
    assert e.notes == ["try 2: the advisor's answer was not an instruction (no position named)"]
    layer = s.edits_layer(kept=True)
    assert (layer == ADD).sum() == 3 and (layer == REMOVE).sum() == 0
    assert (s.edits_layer(kept=False) == REMOVE).sum() == 1


def test_decisions_and_paint_make_the_saved_mask_and_a_review_record(run) -> None:
    out, initial, refined = run
    s = ReviewSession(open_folder(out))
    s.decide("r1-b0-d0-t1", "reject")      # undo the agents' join
    s.decide("r1-b1-d0-t1", "accept")      # take the removal they rejected
    paint = np.zeros(SHAPE, np.uint8)
    paint[4, 8, 6:9] = ADD                 # join it by hand instead
    paint[4, 8, 1] = REMOVE
    s.paint(paint)
    path = s.save()
    expected = initial.copy()
    expected[2, 3, 20] = False
    expected[4, 8, 6:9] = True
    expected[4, 8, 1] = False
    assert path == out / "reviewed_mask.tif"
    assert (np.asarray(read_mask(path).load()) == expected).all()
    assert (np.asarray(read_mask(out / "refined_mask.tif").load()) == refined).all()   # the run's own is kept
    review = read_trace(out / "trace.jsonl")[-1]
    assert review["type"] == "review" and review["mask"] == "reviewed_mask.tif" and review["blocks_painted"] == [0]
    assert [(d["edit"], d["agents"], d["person"]) for d in review["decisions"]] == [
        ("r1-b0-d0-t1", "accept", "reject"), ("r1-b1-d0-t1", "reject", "accept")]
    assert not list(out.glob(".*part")) and not (out / ".refine.lock").exists()

    again = ReviewSession(open_folder(out))           # a later review starts where this one stopped
    assert again.decisions == s.decisions and (again.correction == s.correction).all()
    assert (again.result() == expected).all()
    s.decide("r1-b0-d0-t1", None)                     # back to the agents' verdict
    assert s.kept(s.by_id["r1-b0-d0-t1"])
    with pytest.raises(ValueError, match="decision must be"):
        s.decide("r1-b0-d0-t1", "maybe")


@pytest.mark.parametrize("problem", ["missing", "file", "no_trace", "no_run", "unfinished", "whole_volume",
                                     "image_moved", "shape"])
def test_a_folder_that_is_no_finished_run_is_one_error_naming_the_file(run, problem: str) -> None:
    out, _, _ = run
    target = out
    if problem == "missing":
        target = out / "nope"
    elif problem == "file":
        target = out / "refined_mask.tif"
    elif problem == "no_trace":
        (out / "trace.jsonl").unlink()
    elif problem == "no_run":
        (out / "trace.jsonl").write_text('{"type": "decision"}\n')
    elif problem == "unfinished":
        (out / "refined_mask.tif").unlink()
    elif problem == "whole_volume":
        (out / "refined_mask.tif").unlink()
        (out / "refined_mask.ome.zarr").mkdir()
    elif problem == "image_moved":
        (out.parent / "img.tif").rename(out.parent / "elsewhere.tif")
    elif problem == "shape":
        write_volume(out / "refined_mask.tif", np.zeros((2, 2, 2), bool))
    names = {"missing": "nope", "file": "refined_mask.tif", "no_trace": "trace.jsonl", "no_run": "trace.jsonl",
             "unfinished": "refined_mask.tif",
             "whole_volume": "refined_mask.ome.zarr", "image_moved": "img.tif", "shape": "refined_mask.tif"}
    with pytest.raises(InputError) as exc:
        open_folder(target)
    assert names[problem] in str(exc.value) and "\n" not in str(exc.value)
    if problem == "image_moved":
        assert "--image" in str(exc.value)
        assert open_folder(out, image=out.parent / "elsewhere.tif").image.shape == SHAPE


def test_the_cli_says_what_is_wrong_in_one_line(run) -> None:
    from typer.testing import CliRunner

    from neurorefiner.cli.main import app

    out, _, _ = run
    (out / "refined_mask.tif").unlink()
    result = CliRunner().invoke(app, ["review", str(out)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "refined_mask.tif" in lines[0], result.output


def test_the_layers_without_napari(run) -> None:
    from neurorefiner.review.layers import CORRECTION, EDITS, ESCALATIONS, layer_data
    from neurorefiner.review.napari_reader import get_reader

    out, _, _ = run
    layers = {kw["name"]: (data, kind) for data, kw, kind in layer_data(ReviewSession(open_folder(out)))}
    assert {"image", "initial mask", "refined mask", EDITS, ESCALATIONS, CORRECTION} <= set(layers)
    assert layers[ESCALATIONS][0].shape == (1, 3) and layers[CORRECTION][0].max() == 0
    assert get_reader(str(out)) is not None and get_reader(str(out / "refined_mask.tif")) is None
