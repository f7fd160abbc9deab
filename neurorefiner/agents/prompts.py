"""Prompt templates as files (``agents/prompts/*.md``), checked for their placeholders when loaded.

A template is ``string.Template`` text (``$name``), so JSON examples with braces need no escaping. Each
role declares the placeholders it fills; a template that lacks one or uses an unknown one fails at
load, not halfway through a run. The prompt id written to the trace is the file name plus a short
hash of its text, so a trace says exactly which wording produced each answer.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "inspector": frozenset({"inputs_list", "n_blocks", "last_block", "betti_table"}),
    "advisor": frozenset({"error_type", "feedback", "grammar"}),
    "validator": frozenset({"instruction", "error_type"}),
}
_NAME = re.compile(r"\$(?:(\w+)|\{(\w+)\})")


class PromptError(ValueError):
    """A template that does not fit its role."""


@dataclass(frozen=True)
class Prompt:
    role: str
    text: str
    id: str

    def render(self, **values: object) -> str:
        return string.Template(self.text).substitute({k: str(v) for k, v in values.items()})


def placeholders(text: str) -> set[str]:
    return {a or b for a, b in _NAME.findall(text)}


def load_prompt(role: str, path: str | Path | None = None) -> Prompt:
    """The template for ``role`` (default: the shipped file), checked against the role's placeholders."""
    if role not in PLACEHOLDERS:
        raise PromptError(f"unknown role {role!r}; expected one of {sorted(PLACEHOLDERS)}")
    p = Path(path) if path else PROMPT_DIR / f"{role}.md"
    if not p.exists():
        raise PromptError(f"prompt template not found: {p}")
    text = p.read_text(encoding="utf-8")
    found, want = placeholders(text), PLACEHOLDERS[role]
    if found != want:
        missing, unknown = sorted(want - found), sorted(found - want)
        raise PromptError(f"{p}: template for the {role} must use {sorted(want)}"
                          + (f"; missing {missing}" if missing else "") + (f"; unknown {unknown}" if unknown else ""))
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return Prompt(role, text, f"{p.stem}@{digest}")
