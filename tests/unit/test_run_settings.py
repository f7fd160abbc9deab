"""A run folder's last.ckpt is resumed only by a run with the same weight-shaping settings."""

from __future__ import annotations

import json

import pytest

from neurorefiner.errors import InputError
from neurorefiner.training.run_settings import SETTINGS_FILE, differences, resume_point, without


def test_differences_name_each_changed_leaf() -> None:
    assert differences({"data": {"labels": "gold", "band": 4}}, {"data": {"labels": "adaptive", "band": 4}}) == [
        "data.labels: gold -> adaptive"]
    assert differences({"a": 1}, {"a": 1, "b": 2}) == ["b: (unset) -> 2"]


def test_resume_point(tmp_path) -> None:
    run = tmp_path / "run"
    assert resume_point(run, {"lr": 0.1}) is None  # nothing to resume; the settings are recorded
    assert json.loads((run / SETTINGS_FILE).read_text()) == {"lr": 0.1}
    (run / "last.ckpt").write_bytes(b"")
    assert resume_point(run, {"lr": 0.1}) == str(run / "last.ckpt")
    with pytest.raises(InputError, match=r"lr: 0.1 -> 0.2"):
        resume_point(run, {"lr": 0.2})
    assert resume_point(run, {"lr": 0.2}, enabled=False) is None  # start over: the new settings are recorded
    assert resume_point(run, {"lr": 0.2}) == str(run / "last.ckpt")


def test_a_folder_from_before_the_check_still_resumes(tmp_path) -> None:
    (tmp_path / "last.ckpt").write_bytes(b"")
    assert resume_point(tmp_path, {"lr": 0.1}) == str(tmp_path / "last.ckpt")


def test_without_drops_keys_at_any_depth() -> None:
    assert without({"a": {"num_workers": 2, "b": 1}, "num_workers": 1}, {"num_workers"}) == {"a": {"b": 1}}


def test_a_key_one_side_lacks_counts_as_its_default() -> None:
    assert differences({"m": {"a": 1}}, {"m": {"a": 1, "b": 0.0}}, {"m.b": 0.0}) == []
    assert differences({"m": {"a": 1}}, {"m": {"a": 1, "b": 2.0}}, {"m.b": 0.0}) == ["m.b: 0.0 -> 2.0"]
    assert differences({"m": {"a": 1}}, {"m": {"a": 1, "b": 0.0}}) == ["m.b: (unset) -> 0.0"]


def test_a_cache_folder_elsewhere_is_not_another_run() -> None:
    """A committed resume point copied into another checkout records another absolute cache path: still the same
    run (CI refused the budget run's resume from /check/work/main for this alone)."""
    old = {"text_encoder": {"name": "minilm", "cache_dir": "/work/main/data/cache/text_embeddings"}}
    new = {"text_encoder": {"name": "minilm", "cache_dir": "/check/work/main/data/cache/text_embeddings"}}
    assert differences(old, new) == []
    assert differences(old, {"text_encoder": {**new["text_encoder"], "name": "qwen"}}) == [
        "text_encoder.name: minilm -> qwen"]


def test_a_resume_point_copied_into_another_checkout_is_the_same_run() -> None:
    """checkpoints/resume/*/README.md says to copy the folder into a fresh clone to resume: its record names the
    data, shards and start weights by the absolute paths of the machine it ran on, which are not another run."""
    old = {"node": {"shards": "/work/main/data/cache/shards/stage1", "init_from": "/work/main/checkpoints/a.ckpt",
                    "root": "/work/main/data/diadem_op"}}
    new = {"node": {"shards": "/check/work/main/data/cache/shards/stage1",
                    "init_from": "/check/work/main/checkpoints/a.ckpt", "root": "/check/work/main/data/diadem_op"}}
    assert differences(old, new) == []
    other = {"node": {**new["node"], "shards": "/check/work/main/data/cache/shards/stage1_faint"}}
    assert differences(old, other) == ["node.shards: /work/main/data/cache/shards/stage1 -> "
                                       "/check/work/main/data/cache/shards/stage1_faint"]
    assert differences({"p": "/a/b"}, {"p": "/c/b"}) == ["p: /a/b -> /c/b"]  # outside the project: compared whole
