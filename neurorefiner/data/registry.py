"""Datasets by name. Each dataset lists its :class:`Case` s per split; Hydra builds them by ``_target_``
(``conf/dataset/*.yaml``), code that is not Hydra-driven calls :func:`get_dataset`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from neurorefiner.data.cases import Case


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


def _load_builtin() -> None:
    # importing the modules registers their datasets
    from neurorefiner.data import bigneuron_gold, diadem, published  # noqa: F401

    try:
        from neurorefiner.synth import presets  # noqa: F401
    except ImportError:
        pass


def available() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def get_dataset(name: str, **kwargs) -> Dataset:
    _load_builtin()
    if name not in _REGISTRY:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](**kwargs)


def check_split(name: str, split: str, splits: tuple[str, ...]) -> None:
    if split not in splits:
        raise ValueError(f"dataset {name!r} has splits {splits}, not {split!r}")
