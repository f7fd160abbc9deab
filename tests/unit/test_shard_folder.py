"""``neurorefiner make-shards``: a bad option is one line and exit 2 before any loading, with nothing written; a
shard folder records every setting that shapes its samples and refuses a run with other settings (it used to
exit 0 and write a manifest of shards the folder did not hold). The volumes are two tiny ones in memory."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.data.sample_shards import ShardSettings, write_shards
from neurorefiner.data.shard_makers import GoldVolumes, stage1_record
from neurorefiner.errors import InputError
from tests.unit.test_sample_shards import CROP, Volumes, _settings

SMALL = ["--n", "4", "--shard-size", "2", "--crop", ",".join(map(str, CROP)), "--workers", "1",
         "--ops", "connect=0.5,remove=0.5,cut=0", "--distractor-prob", "0"]


def one_line_exit_2(result, *words: str) -> str:  # type: ignore[no-untyped-def]
    """The stderr of a CliRunner result that ended as a user's mistake should: exit 2, one line, ``words`` in it."""
    err = result.stderr.strip()
    assert result.exit_code == 2, (result.output, result.exception)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert all(w in err for w in words), err
    return err


@pytest.mark.parametrize(("option", "words"), [
    (["--dataset", "diademm"], ["--dataset diademm", "no such dataset", "diadem, "]),
    (["--n", "0"], ["--n 0", ">= 1"]),
    (["--n", "-5"], ["--n -5", ">= 1"]),
    (["--shard-size", "0"], ["--shard-size 0", ">= 1"]),
    (["--workers", "0"], ["--workers 0"]),
    (["--part", "test"], ["--part test", "train or val"]),
    (["--stage", "3"], ["--stage 3"]),
    (["--seed", "-1"], ["--seed", ">= 0"]),
    (["--distractor-prob", "2"], ["--distractor-prob", "[0, 1]"]),
    (["--faint-contrast", "a,b"], ["--faint-contrast", "low,high"]),
    (["--ops", "join=1"], ["--ops", "connect"]),
    (["--crop", "2,2,2"], ["--crop", ">= 6"]),
])
def test_a_bad_option_is_one_line_and_exit_2_before_any_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 option: list[str], words: list[str]) -> None:
    def no_loading(*_: object, **__: object) -> None:
        raise AssertionError("loaded before the options were checked")

    monkeypatch.setattr("neurorefiner.data.shard_makers.make_shards", no_loading)
    result = CliRunner().invoke(app, ["make-shards", "--out", str(tmp_path / "s"), *option])
    one_line_exit_2(result, *words)
    assert not (tmp_path / "s").exists()


@pytest.fixture()
def in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each dataset's training cases are the two tiny volumes (no data loaded from disk)."""
    def cases(self: GoldVolumes) -> list:
        return [(d, SimpleNamespace(name=f"v{i}")) for d in self.datasets for i in (0, 1)]

    monkeypatch.setattr(GoldVolumes, "cases", cases)
    monkeypatch.setattr(GoldVolumes, "__call__", lambda self: Volumes()())


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("change", "named"), [
    (["--shard-size", "4"], "--shard-size 4 (the folder's: 2)"),
    (["--n", "6"], "--n 6 (the folder's: 4)"),
    (["--dataset", "tiny"], "--dataset tiny (the folder's: diadem)"),
    (["--part", "val"], "--part val (the folder's: train)"),
    (["--seed", "3"], "--seed 3 (the folder's: 0)"),
])
def test_a_finished_folder_refuses_a_run_with_other_settings(tmp_path: Path, in_memory: None, change: list[str],
                                                             named: str) -> None:
    out = tmp_path / "shards"
    first = CliRunner().invoke(app, ["make-shards", "--out", str(out), *SMALL])
    assert first.exit_code == 0, first.output
    record = json.loads((out / "settings.json").read_text())
    assert {"datasets", "part", "stage", "n_samples", "shard_size", "crop_size", "op_shares", "variant_shares",
            "seed", "writer_version", "sources"} <= set(record)
    before = _files(out)
    again = CliRunner().invoke(app, ["make-shards", "--out", str(out), *SMALL, *change])
    one_line_exit_2(again, str(out), "other settings", named)
    assert _files(out) == before  # nothing written: the manifest still describes the shards there


def test_the_same_run_again_continues(tmp_path: Path, in_memory: None) -> None:
    out = tmp_path / "shards"
    assert CliRunner().invoke(app, ["make-shards", "--out", str(out), *SMALL]).exit_code == 0
    kept = (out / "shard-00000" / "image.npy").read_bytes()
    again = CliRunner().invoke(app, ["make-shards", "--out", str(out), *SMALL])
    assert again.exit_code == 0, again.output
    assert (out / "shard-00000" / "image.npy").read_bytes() == kept


def test_a_folder_of_other_files_is_refused(tmp_path: Path, in_memory: None) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["make-shards", "--out", str(tmp_path), *SMALL])
    one_line_exit_2(result, "not a folder of sample shards")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def _old_folder(out: Path, settings: ShardSettings, with_manifest: bool) -> None:
    """A folder as make-shards wrote it before every setting was recorded: the sample settings only."""
    write_shards(out, Volumes(), stage1_record, settings, 4, shard_size=2, workers=1, sources=["v0", "v1"],
                 progress=False)
    (out / "settings.json").write_text(json.dumps(settings.stamp(), sort_keys=True, default=list))
    if not with_manifest:
        (out / "manifest.json").unlink()


def test_an_older_folder_is_read_through_its_manifest(tmp_path: Path) -> None:
    out = tmp_path / "old"
    _old_folder(out, _settings(), with_manifest=True)
    write_shards(out, Volumes(), stage1_record, _settings(), 4, shard_size=2, workers=1, sources=["v0", "v1"],
                 progress=False)  # the same run: kept, and its record completed
    assert json.loads((out / "settings.json").read_text())["n_samples"] == 4
    with pytest.raises(InputError, match="--shard-size 4"):
        write_shards(out, Volumes(), stage1_record, _settings(), 4, shard_size=4, workers=1,
                     sources=["v0", "v1"], progress=False)
    unfinished = tmp_path / "unfinished"
    _old_folder(unfinished, _settings(), with_manifest=False)
    with pytest.raises(InputError, match="not recorded"):  # nothing says how many samples it was making
        write_shards(unfinished, Volumes(), stage1_record, _settings(), 4, shard_size=2, workers=1,
                     sources=["v0", "v1"], progress=False)
