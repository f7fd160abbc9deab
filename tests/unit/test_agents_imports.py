"""How the agents' backends (agents/<backend>/: heuristic, learned, vlm) stand to one another, read statically.

A backend uses another's or a shared agents module's public names only: geometry two backends need lives in one
shared module (:mod:`neurorefiner.agents.pieces`) that both import, so no backend reaches into another's private
helpers or keeps a copy of them. Private names are shared only inside one backend's own package."""

from __future__ import annotations

import ast
from pathlib import Path

import neurorefiner.agents as agents_pkg
import neurorefiner.agents.roles as roles_module

AGENTS = Path(__file__).resolve().parents[2] / "neurorefiner" / "agents"
BACKENDS = sorted(p.name for p in AGENTS.iterdir() if (p / "__init__.py").is_file())


def _backend(module: str) -> str | None:
    """``neurorefiner.agents.<backend>.x`` -> backend; a shared agents module (agents/x.py) -> None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[2] in BACKENDS else None


def _private_imports(path: Path) -> list[str]:
    own = _backend(".".join(path.relative_to(AGENTS.parents[1]).with_suffix("").parts))
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.startswith("neurorefiner.agents.")):
            continue
        if own is not None and _backend(node.module) == own:
            continue  # within one backend's own package
        found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    return found


def test_no_private_name_crosses_an_agents_module() -> None:
    assert BACKENDS and "learned" in BACKENDS and "heuristic" in BACKENDS
    found = {str(p.relative_to(AGENTS)): names for p in sorted(AGENTS.rglob("*.py")) if (names := _private_imports(p))}
    assert not found, f"private names imported across agents modules (make them public in agents/pieces.py): {found}"


def test_every_backend_is_named_where_the_backends_are_listed() -> None:
    configs = sorted(p.stem for p in (AGENTS.parents[1] / "conf" / "agent").glob("*.yaml"))
    assert set(BACKENDS) <= set(configs)
    for doc in (agents_pkg.__doc__, roles_module.__doc__):
        missing = [name for name in configs if f"``{name}``" not in (doc or "")]
        assert not missing, f"backends left out of the list: {missing}"


def _fitting(path: Path) -> list[str]:
    """Where ``path`` fits a model: sklearn, LightGBM's ``train``, a torch optimiser or a backward pass."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        lgb_train = isinstance(node, ast.Attribute) and node.attr == "train" and getattr(node.value, "id", "") == "lgb"
        if any(m.split(".")[0] == "sklearn" for m in modules) or lgb_train or (
                isinstance(node, ast.Attribute) and node.attr in {"optim", "backward"}):
            found.append(f"{path.relative_to(AGENTS)}:{node.lineno}")
    return found


def test_agents_hold_no_fitting_code() -> None:
    """agents/ is what runs; fitting the judge (models, thresholds, labels, mining) is in adaptation/judge/."""
    found = [where for p in sorted(AGENTS.rglob("*.py")) for where in _fitting(p)]
    assert not found, f"fitting code under agents/ (move it to neurorefiner/adaptation/judge/): {found}"
