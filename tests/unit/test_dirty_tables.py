"""A committed table is computed on a clean tree: from a dirty one the header says so loudly, and writing
into experiments/ is refused unless allow_dirty=true (elsewhere is fine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.evaluation import paper_tables

CONF = Path(__file__).resolve().parents[2] / "conf"
ROWS = [{"method": "initial", "protocol": "root_seeded", "segmenter": "unet3d", "case": "a", "F1": 0.7, "SSD": 9.0}]


class _Ds:
    name = "diadem"
    synthetic = False


def _cfg(out: Path, *overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="evaluate", overrides=[f"out_dir={out}", "paths.output_dir=/tmp/nr", *overrides])
    OmegaConf.set_struct(cfg, False)
    cfg.table = {"name": "t", "title": "T", "out": str(out), "protocol": "root_seeded",
                 "rows": [{"label": "U-Net", "method": "initial"}], "metrics": ["SSD", "F1"], "command": "x"}
    return cfg


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root in tmp with a dirty tree."""
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    monkeypatch.setattr("neurorefiner.paths.tree_state", lambda *a, **k: ("abc1234", True))
    return tmp_path


def test_dirty_tree_refuses_experiments(project: Path) -> None:
    out = project / "experiments" / "table_x"
    with pytest.raises(InputError, match="allow_dirty=true"):
        paper_tables.write_paper_table(_cfg(out), ROWS, _Ds())
    with pytest.raises(InputError, match="clean tree"):
        paper_tables.write_not_run(_cfg(out), "diadem", "no server")
    assert not (out / "t.md").exists()


def test_dirty_tree_is_said_loudly_and_allowed_when_asked(project: Path) -> None:
    out = project / "experiments" / "table_x"
    md = paper_tables.write_paper_table(_cfg(out, "allow_dirty=true"), ROWS, _Ds())["md"].read_text()
    assert "WARNING: COMPUTED ON A TREE WITH UNCOMMITTED CHANGES" in md.splitlines()[2]
    elsewhere = paper_tables.write_paper_table(_cfg(project / "scratch"), ROWS, _Ds())["md"].read_text()
    assert "UNCOMMITTED CHANGES (`abc1234+dirty`)" in elsewhere


def test_clean_tree_writes_experiments_without_a_warning(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("neurorefiner.paths.tree_state", lambda *a, **k: ("abc1234", False))
    md = paper_tables.write_paper_table(_cfg(project / "experiments" / "t"), ROWS, _Ds())["md"].read_text()
    assert "WARNING" not in md and "`abc1234`" in md


def test_synthetic_label_comes_from_the_dataset_config() -> None:
    assert paper_tables.is_synthetic("tiny") and paper_tables.is_synthetic("synthetic_zbfwb")
    assert not paper_tables.is_synthetic("diadem") and not paper_tables.is_synthetic("bigneuron")
    for path in (CONF / "dataset").glob("*.yaml"):
        assert isinstance(OmegaConf.load(path).get("synthetic"), bool), path.name


def test_a_table_rewriting_itself_is_not_a_dirty_tree_but_any_other_change_is(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A table's run.sh with two commands (the U-Net rows, then the nnU-Net-style rows, each with its own methods)
    was refused at the second: the first had rewritten the table, and its own file made the tree "dirty". A
    change anywhere else (code, another table) still is one."""
    import subprocess

    from neurorefiner.paths import git_commit, tree_state

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    table, code = tmp_path / "experiments" / "table_x" / "t.md", tmp_path / "neurorefiner" / "a.py"
    for path in (table, code):
        path.parent.mkdir(parents=True)
        path.write_text("first\n")
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "empty")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "x")
    monkeypatch.setenv("PROJECT_ROOT", str(tmp_path))
    table.write_text("rewritten\n")
    assert tree_state()[1] and git_commit().endswith("+dirty")
    assert not tree_state(ignore=table.parent)[1] and not git_commit(table.parent).endswith("+dirty")
    code.write_text("changed\n")
    assert tree_state(ignore=table.parent)[1]
    cfg = _cfg(table.parent)
    with pytest.raises(InputError, match="clean tree"):
        paper_tables.check_table_destination(cfg)
    code.write_text("first\n")
    paper_tables.check_table_destination(cfg)   # only its own table changed: allowed
