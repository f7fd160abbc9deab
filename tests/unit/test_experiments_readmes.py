"""experiments/: every folder has a README.md (what it holds, the command that made it) and is named in
experiments/README.md, so a reader finds each result from one page."""

from __future__ import annotations

import re
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _folders() -> list[str]:
    return sorted(p.name for p in EXPERIMENTS.iterdir() if p.is_dir())


def _listed(index: str) -> set[str]:
    """Folder names in the index: `name/`, and `stem_{a,b}/` for a family of folders."""
    names: set[str] = set()
    for stem, alts in re.findall(r"`([\w-]+?)(?:\{([\w,]+)\})?/`", index):
        names |= {stem + a for a in alts.split(",")} if alts else {stem}
    return names


def test_every_folder_has_a_readme() -> None:
    assert [d for d in _folders() if not (EXPERIMENTS / d / "README.md").is_file()] == []


def test_every_folder_is_listed_in_the_index() -> None:
    listed = _listed((EXPERIMENTS / "README.md").read_text())
    assert [d for d in _folders() if d not in listed] == []
