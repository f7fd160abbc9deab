"""The package's import direction (DESIGN.md): io, topology < synth, defects, tracing, metrics < models,
data < agents < evaluation. A module may import from its own layer or below, never from above; read
statically (ast), so it costs no imports and catches lazy imports inside functions too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "neurorefiner"
LAYER = {"errors": 0, "paths": 0, "io": 0, "topology": 0,
         "synth": 1, "defects": 1, "tracing": 1, "metrics": 1,
         "models": 2, "data": 2,
         "agents": 3,
         "evaluation": 4}
# the case record and the dataset registry are plain lookups that the synthetic presets register into
LOW_LEVEL_MODULES = {"neurorefiner.data.cases": 1, "neurorefiner.data.registry": 1}


def _subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "neurorefiner" else None


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def _layered_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] in LAYER)


@pytest.mark.parametrize("path", _layered_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_from_a_higher_layer(path: Path) -> None:
    own = LAYER[path.relative_to(PACKAGE).parts[0]]
    for module in _imports(path):
        sub = _subpackage(module)
        if sub in LAYER:
            layer = LOW_LEVEL_MODULES.get(module, LAYER[sub])
            assert layer <= own, f"{path.relative_to(PACKAGE)} imports {module} from a higher layer"


def test_grammar_has_one_definition_under_two_names() -> None:
    from neurorefiner.agents import instructions as agent_view
    from neurorefiner.topology import instructions as grammar

    assert agent_view.Instruction is grammar.Instruction
    assert agent_view.parse_instruction is grammar.parse_instruction
