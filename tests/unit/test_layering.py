"""The package's import direction, one way only: leaves (io, topology, synth, defects, tracing, metrics) <
data < models < postprocessing < baselines < training, inference < agents (roles, backends, the loop) < refine
(one run of the loop from config: settings, spacing, resume, outputs, executors) < evaluation (the protocol) <
review (a person settles a run) < studies (one-off measurements) < cli and the entry points. A module
imports from its own stage or from stages below it, never from above, and the modules form no import
circle. The rule keeps each stage usable without the ones above it (the protocol without the studies,
inference without evaluation). Read statically (ast), so it costs no imports and catches lazy imports
inside functions too. There is no whitelist: a module that needs something from above is in the wrong
stage. The design page states the same order, but it lives beside the checkout (../shared/DESIGN.md), not
in this repository: this docstring and STAGES below are the rule as the repository holds it.

Four house rules ride along, read the same way: no Python under ``experiments/`` (a study's code lives in
``neurorefiner/studies/``, its command in ``neurorefiner/cli/study/``, only its ``run.sh``, README and outputs in
``experiments/<study>/``); no argparse in the package (commands are the typer app's); one CSV writer,
``neurorefiner/evaluation/tables.py``, through which every table is written; and no function over 80 lines nor
module over 600 in the package (split by job, into named steps), with a short allow-list that only shrinks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "neurorefiner"
TABLE_WRITER = PACKAGE / "evaluation" / "tables.py"
STAGES: list[set[str]] = [
    {"errors", "paths", "settings", "io", "topology"},
    {"synth", "defects", "tracing", "metrics"},
    {"data"},
    {"models"},
    {"postprocessing"},
    {"baselines"},
    {"training", "inference"},
    {"agents"},
    {"refine"},
    {"evaluation"},
    {"adaptation"},   # plan -> train -> choose: its choose step scores policies through evaluation/
    {"review"},
    {"studies"},
    {"cli", "__main__"},  # python -m neurorefiner: the console command
]
LAYER = {name: level for level, names in enumerate(STAGES) for name in names}


def _top(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "neurorefiner" else None


def _imports(path: Path) -> list[str]:
    """Absolute module names imported by ``path`` (``from neurorefiner import x`` counts as ``neurorefiner.x``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "neurorefiner":
                out += [f"neurorefiner.{a.name}" for a in node.names]
            else:
                out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "__init__.py")


def _stage_of(path: Path) -> str:
    first = path.relative_to(PACKAGE).parts[0]
    return first[:-3] if first.endswith(".py") else first


def test_every_package_module_has_a_stage() -> None:
    unknown = {_stage_of(p) for p in _package_files()} - set(LAYER)
    assert not unknown, f"modules outside every pipeline stage: {sorted(unknown)}; add them to STAGES"


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_from_a_higher_stage(path: Path) -> None:
    own = LAYER.get(_stage_of(path))
    if own is None:
        pytest.skip("reported by test_every_package_module_has_a_stage")
    for module in _imports(path):
        top = _top(module)
        if top in LAYER:
            assert LAYER[top] <= own, f"{path.relative_to(PACKAGE)} imports {module} from a higher stage"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def test_no_import_circle_between_modules() -> None:
    """Module-level imports (the ones that run at import time) form no cycle; lazy imports inside functions
    are allowed to point sideways but never up (checked above)."""
    graph: dict[str, set[str]] = {}
    modules = {_module_name(p) for p in _package_files()}
    for path in _package_files():
        name = _module_name(path)
        tree = ast.parse(path.read_text())
        deps = set()
        for node in ast.walk(tree):  # lazy imports too: a circle through a function is still a circle
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                    node.module.startswith("neurorefiner"):
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
                if all(f"{node.module}.{a.name}" in modules for a in node.names):
                    deps.discard(node.module)  # `from pkg import submodule` needs the submodule only
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("neurorefiner"))
        graph[name] = deps
    # a package's own modules may use its __init__ (python runs it first anyway)
    graph = {k: {d for d in v if d in graph and d != k and not k.startswith(d + ".")} for k, v in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])


def test_grammar_has_one_definition_under_two_names() -> None:
    from neurorefiner.agents import instructions as agent_view
    from neurorefiner.topology import instructions as grammar

    assert agent_view.Instruction is grammar.Instruction
    assert agent_view.parse_instruction is grammar.parse_instruction


def test_no_python_under_experiments() -> None:
    """experiments/<study>/ holds a run.sh of CLI lines, a README and what it produced; code goes in the package."""
    found = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "experiments").rglob("*.py"))
    assert not found, f"Python under experiments/ (move it into neurorefiner/studies/ + a cli/study command): {found}"


def test_no_inline_python_in_experiments_scripts() -> None:
    """A ``python -c "..."`` in a run script is package logic kept out of the package (a card, a hand-set
    post-processing): it belongs in a command (``neurorefiner make segmenter-card``, ``neurorefiner make
    postprocess --record``)."""
    inline = re.compile(r"(python3?|\$PY|\$\{PY\})\s+-c\b")
    found = sorted(f"{p.relative_to(ROOT)}:{i}" for p in (ROOT / "experiments").rglob("*.sh")
                   for i, line in enumerate(p.read_text().splitlines(), 1) if inline.search(line))
    assert not found, f"inline Python in experiments scripts (make it a neurorefiner command): {found}"


def _modules_named(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (``import a.b``, ``from a import b`` -> ``a``)."""
    tree = ast.parse(path.read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module.split(".")[0] for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}


def test_no_argparse_in_the_package() -> None:
    """Every command is a typer command of the ``neurorefiner`` app (studies under cli/study/) over a plain
    function; a module with its own argparse main is a second, untested command line."""
    found = [str(p.relative_to(PACKAGE)) for p in sorted(PACKAGE.rglob("*.py")) if "argparse" in _modules_named(p)]
    assert not found, f"argparse in the package: {found}"


def test_one_csv_writer() -> None:
    """Tables are written through evaluation/tables.py (write_rows_csv): no other module makes a csv writer."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE_WRITER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            writer = (isinstance(node, ast.Attribute) and node.attr in {"writer", "DictWriter"}
                      and isinstance(node.value, ast.Name) and node.value.id == "csv") or \
                     (isinstance(node, ast.ImportFrom) and node.module == "csv"
                      and any(a.name in {"writer", "DictWriter"} for a in node.names))
            if writer:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not found, f"CSV written outside evaluation/tables.py (use tables.write_rows_csv): {found}"


MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
# What still breaks the size rule, in files other work owns right now: "path" for a module, "path::function" for a
# function (paths relative to neurorefiner/). It only shrinks: a new entry is a function to split instead, and an
# entry that no longer breaks the rule fails test_size_allow_list_names_only_what_still_breaks_the_rule.
TOO_LONG_ALLOWED: dict[str, str] = {}


def _too_long() -> dict[str, int]:
    """Every module over MAX_MODULE_LINES and function (method, nested function) over MAX_FUNCTION_LINES in the
    package, with its length: a module's lines in its file, a function's from ``def`` to its last line."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found[rel] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > MAX_FUNCTION_LINES:
                    found[f"{rel}::{node.name}"] = length
    return found


def test_no_function_over_80_lines_and_no_module_over_600() -> None:
    """A function does one step and a module holds one job: a long function is split into named steps, a long
    module by job (settings, helpers, one module per operation), so each part can be read and tested alone."""
    over = sorted(f"{name} ({n} lines)" for name, n in _too_long().items() if name not in TOO_LONG_ALLOWED)
    assert not over, (f"over {MAX_FUNCTION_LINES} lines per function or {MAX_MODULE_LINES} per module "
                      f"(split it into named steps or modules by job): {over}")


def test_size_allow_list_names_only_what_still_breaks_the_rule() -> None:
    stale = sorted(set(TOO_LONG_ALLOWED) - set(_too_long()))
    assert not stale, f"these no longer break the size rule: remove them from TOO_LONG_ALLOWED: {stale}"
