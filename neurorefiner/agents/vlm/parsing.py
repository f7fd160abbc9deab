"""Reading a model's JSON answer when the server did not enforce the schema.

Models wrap JSON in code fences, add a sentence before it, use single quotes or trailing commas, or
answer with the paper's bare ``"1": "FN", "5": "FP"`` pairs. :func:`parse_json` tries, in order: the
whole text, the first balanced ``{...}``, the same with light repairs, and finally key/value pairs
found anywhere; it raises :class:`AnswerParseError` when none gives an object.
"""

from __future__ import annotations

import json
import re
from typing import Any


class AnswerParseError(ValueError):
    """A model's answer that holds no JSON object."""


def _balanced(text: str) -> str | None:
    start = text.find("{")
    while start >= 0:
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            c = text[i]
            if in_str:
                esc = (c == "\\") and not esc
                if c == '"' and not esc:
                    in_str = False
                continue
            if c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return text[start: i + 1]
        start = text.find("{", start + 1)
    return None


def _repair(text: str) -> str:
    text = re.sub(r",\s*([}\]])", r"\1", text)          # trailing commas
    if '"' not in text:
        text = text.replace("'", '"')                     # single-quoted JSON
    return text


def parse_json(text: str | None) -> dict[str, Any]:
    if text is None or not str(text).strip():
        raise AnswerParseError("empty answer")
    s = str(text).strip()
    s = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", s)
    for candidate in (s, _balanced(s)):
        if candidate is None:
            continue
        for attempt in (candidate, _repair(candidate)):
            try:
                out = json.loads(attempt)
            except json.JSONDecodeError:
                continue
            if isinstance(out, dict):
                return out
    pairs = re.findall(r'["\']?(\w+)["\']?\s*:\s*["\']([^"\']*)["\']', s)
    if pairs:
        return dict(pairs)
    raise AnswerParseError(f"no JSON object in the answer: {s[:120]!r}")
