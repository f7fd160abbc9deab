"""Every ``neurorefiner`` command checks its output paths before any work: a path under a file, a folder where a
file goes (or a file where a folder goes) or a place that cannot be written is one line naming the path, exit
code 2, nothing written. The commands are read from the typer app, so a new command that writes somewhere
without declaring it (``neurorefiner.cli.common.writes``) fails here."""

from __future__ import annotations

import inspect
import os
import typing
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from neurorefiner.cli.main import app

# commands that take no output path: they print, or write only the project's own fixed files
NO_OUTPUT_PATH = {"info", "score", "inspect", "make standin-card", "study equal-budget-table",
                  "study checkpoint-choice-table",
                  "study loss-probe-table",  # writes summary.md into the --results folder it reads
                  "make doc-tables"}  # rewrites, in place, the Markdown files it reads
# how an output option is spelled; an option of these names that a command does not declare fails the test
OUTPUT_OPTIONS = ("--out", "--dst", "--prob", "--ship-to")


def _commands() -> dict[str, typing.Any]:
    found: dict[str, typing.Any] = {}

    def walk(cmd: typing.Any, words: list[str]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*words, name])
        else:
            found[" ".join(words)] = cmd.callback

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = _commands()
CASES = [(name, param, kind) for name, fn in sorted(COMMANDS.items())
         for param, kind in getattr(fn, "outputs", {}).items()]


def _declared_options(fn: typing.Any) -> dict[str, tuple[str, ...]]:
    return {name: tuple(getattr(p.default, "param_decls", None) or ())
            for name, p in inspect.signature(fn).parameters.items()}


def test_the_app_has_the_commands_the_readme_names() -> None:
    assert {"trace", "segment", "synth", "edit", "train-judge", "study probe-editor"} <= set(COMMANDS)
    assert len(CASES) >= 25


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_declares_what_it_writes(name: str) -> None:
    fn = COMMANDS[name]
    outputs = getattr(fn, "outputs", {})
    undeclared = [decls for param, decls in _declared_options(fn).items()
                  if param not in outputs and any(d in OUTPUT_OPTIONS for d in decls)]
    assert not undeclared, f"{name}: output option(s) {undeclared} not declared with @writes"
    assert bool(outputs) != (name in NO_OUTPUT_PATH), (
        f"{name}: declare its output paths with @writes(...) or add it to NO_OUTPUT_PATH")


def _dummy(annotation: typing.Any, tmp: Path) -> str:
    text = str(annotation)
    if "Path" in text:
        return str(tmp / "no-such-input.tif")
    if "int" in text:
        return "1"
    if "float" in text:
        return "0.5"
    return "x"


def _argv(name: str, param: str, value: str, tmp: Path) -> list[str]:
    """The command line of ``name`` with ``param`` = ``value`` and a stand-in for every other required value
    (inputs that do not exist: the output check must come first)."""
    fn = COMMANDS[name]
    argv, options = name.split(), []
    for pname, p in inspect.signature(fn).parameters.items():
        decls = getattr(p.default, "param_decls", None) or ()
        required = getattr(p.default, "default", None) is ...
        flag = next((d for d in decls if d.startswith("--")), None)
        if pname == param:
            options += [flag, value] if flag else [value]
        elif required:
            options += [flag, _dummy(p.annotation, tmp)] if flag else [_dummy(p.annotation, tmp)]
    return argv + options


def _bad_paths(tmp: Path, kind: str) -> list[tuple[Path, str]]:
    blocker = tmp / "a_file"
    blocker.write_text("not a folder")
    folder = tmp / "a_folder"
    folder.mkdir()
    wrong_kind = (blocker, "existing file") if kind == "folder" else (folder, "existing folder")
    return [(blocker / "sub" / "out.swc", "sits under"), wrong_kind,
            (Path("/proc/nr-no-such-place/out.swc"), "cannot be written")]


@pytest.mark.parametrize(("name", "param", "kind"), CASES, ids=[f"{n}:{p}" for n, p, _ in CASES])
def test_a_bad_output_path_is_one_line_and_exit_2_before_any_work(tmp_path: Path, name: str, param: str,
                                                                  kind: str) -> None:
    for bad, words in _bad_paths(tmp_path, kind):
        before = sorted(str(p) for p in tmp_path.rglob("*"))
        result = CliRunner().invoke(app, _argv(name, param, str(bad), tmp_path))
        err = result.stderr.strip()
        assert result.exit_code == 2, (bad, result.output, result.exception)
        assert len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert str(bad) in err and words in err, err
        assert sorted(str(p) for p in tmp_path.rglob("*")) == before    # nothing written, nothing made


def test_the_issue_example_trace_under_a_file(tmp_path: Path) -> None:
    """``neurorefiner trace mask.tif --out <existing file>/x.swc`` was a FileExistsError traceback from
    io/atomic.py after the whole trace; now one line before reading the mask."""
    (tmp_path / "f").write_text("x")
    result = CliRunner().invoke(app, ["trace", str(tmp_path / "missing.tif"), "--out", str(tmp_path / "f" / "x.swc")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{tmp_path / 'f' / 'x.swc'}: --out sits under {tmp_path / 'f'}, which is a file" in result.stderr
    assert "missing.tif" not in result.stderr      # the output was checked first


def test_atomic_writes_under_a_file_name_the_path(tmp_path: Path) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.io.atomic import write_text_atomic

    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="sits under"):
        write_text_atomic(tmp_path / "f" / "t.md", "text")
    assert os.listdir(tmp_path) == ["f"]
