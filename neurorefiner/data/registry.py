"""Datasets by name. Each dataset lists its :class:`Case` s per split; Hydra builds them by ``_target_``
(``conf/dataset/*.yaml``), code that is not Hydra-driven calls :func:`get_dataset`.

The built-in datasets register themselves when their modules are imported; ``neurorefiner/data/__init__.py``
imports them, and Python runs it before this module, so the registry is full whichever name is used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError


class Dataset(Protocol):
    name: str
    splits: tuple[str, ...]

    def cases(self, split: str = "test") -> list[Case]: ...


_REGISTRY: dict[str, Callable[..., Dataset]] = {}


def register(name: str) -> Callable[[Callable[..., Dataset]], Callable[..., Dataset]]:
    def deco(factory: Callable[..., Dataset]) -> Callable[..., Dataset]:
        _REGISTRY[name] = factory
        return factory

    return deco


def available() -> list[str]:
    return sorted(_REGISTRY)


def get_dataset(name: str, **kwargs) -> Dataset:
    """The dataset ``name``; an unknown name is a user's mistake (:class:`InputError`: one line and exit code 2 from
    any command, not a ``KeyError`` traceback), named with the ones there are."""
    if name not in _REGISTRY:
        raise InputError(f"unknown dataset {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](**kwargs)


def check_split(name: str, split: str, splits: tuple[str, ...]) -> None:
    if split not in splits:
        raise InputError(f"dataset {name!r} has splits {splits}, not {split!r}")
