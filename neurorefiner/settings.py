"""Settings objects built from what a config gives: a frozen dataclass, a mapping of some of its fields, or
nothing (the defaults). One builder, so every settings class refuses unknown keys with the same clear error
instead of a ``TypeError`` from deep inside."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")


def build_settings(cls: type[T], value: T | Mapping[str, Any] | None, what: str) -> T:
    """``cls()`` for None, ``value`` itself when it is a ``cls``, else ``cls(**value)`` after checking that
    every key names a field (``what`` says whose settings in the error)."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(value) - names  # type: ignore[arg-type]
    if unknown:
        raise ValueError(f"unknown {what} settings {sorted(unknown)}; known: {sorted(names)}")
    return cls(**dict(value))  # type: ignore[arg-type]
