"""Which ``last.ckpt`` a training run may resume from.

A run folder (``ckpt_dir``) is stable across calls, so that a killed run started again with the same command
continues where it stopped, and a finished run given a larger budget continues training. The same stability let a
run with *other* settings (say, ``segmentation.data.labels=adaptive`` after a run on the thin label files)
silently resume the old run's finished state and ship its weights. The settings that shape the weights are now
written beside ``last.ckpt``; a resume under different ones is refused with the settings that differ. The budget
(epochs, steps) is not part of them: extending a run is what resuming is for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError

SETTINGS_FILE = "run_settings.json"
# Keys that say where a cache lives, not what shapes the weights: the same run resumed from another checkout (a
# committed resume point in a clean clone, CI's /check/...) has another absolute cache path and must not be refused.
LOCATION_KEYS = frozenset({"cache_dir"})
# The project's top-level folders: an absolute path through one of them names the same file in any checkout
# ("/work/main/data/cache/shards/stage1" and "/check/work/main/data/cache/shards/stage1"), so a resume point copied
# into another clone, as checkpoints/resume/*/README.md says to, compares by the part from the last of them on.
PROJECT_FOLDERS = ("data", "checkpoints", "outputs")


def _within_project(value: Any) -> Any:
    """An absolute path through one of :data:`PROJECT_FOLDERS` as ``<project>/<folder>/...``; anything else as is."""
    if not isinstance(value, str) or not value.startswith("/"):
        return value
    cut = max(value.rfind(f"/{folder}/") for folder in PROJECT_FOLDERS)
    return f"<project>{value[cut:]}" if cut >= 0 else value


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def differences(old: Mapping[str, Any], new: Mapping[str, Any],
                defaults: Mapping[str, Any] | None = None) -> list[str]:
    """``key: old -> new`` for every flattened key whose value differs (missing keys shown as ``(unset)``).

    ``defaults`` (flattened key -> value) stands in for a key one side lacks: an option added to the code after
    a run was recorded is missing from its record, and at its default it trains the same weights as before.
    Keys in :data:`LOCATION_KEYS` are left out on both sides; paths inside the project compare by their part
    from the project's folders on (:func:`_within_project`)."""
    a, b = _flat(without(old, set(LOCATION_KEYS))), _flat(without(new, set(LOCATION_KEYS)))
    d = dict(defaults or {})

    def value(side: dict[str, Any], k: str) -> Any:
        return side.get(k, d.get(k, "(unset)"))

    return [f"{k}: {value(a, k)} -> {value(b, k)}" for k in sorted(set(a) | set(b))
            if _within_project(value(a, k)) != _within_project(value(b, k))]


def without(tree: Any, drop: set[str]) -> Any:
    """``tree`` (plain containers) less the keys named in ``drop``, at any depth: budget, paths, workers."""
    if isinstance(tree, Mapping):
        return {k: without(v, drop) for k, v in tree.items() if k not in drop}
    return tree


def resume_point(run_dir: Path, settings: Mapping[str, Any], enabled: bool = True,
                 defaults: Mapping[str, Any] | None = None) -> str | None:
    """The ``last.ckpt`` of ``run_dir`` to resume from, or None to start afresh; records ``settings`` there.

    ``settings``: JSON-able values that shape the weights (data, model, loss, optimiser, seed). A ``last.ckpt``
    written under other settings raises :class:`InputError` naming them and the two ways out. A ``last.ckpt``
    without a settings file (runs from before this check) resumes as before. ``defaults``: see
    :func:`differences`."""
    run_dir = Path(run_dir)
    last = run_dir / "last.ckpt"
    record = run_dir / SETTINGS_FILE
    settings = json.loads(json.dumps(settings, default=str))  # what the file will hold, for a fair comparison
    resume = None
    if enabled and last.exists():
        if record.exists():
            changed = differences(json.loads(record.read_text()), settings, defaults)
            if changed:
                shown = "; ".join(changed[:6]) + (f"; and {len(changed) - 6} more" if len(changed) > 6 else "")
                raise InputError(f"holds a run trained with other settings ({shown}), and this run would resume it. "
                                 "Pass segmentation.resume=false (segmenters) or stages.<n>.resume=false "
                                 "(TopoRefineNet) to start over in this folder, or another ckpt_dir to keep both", last)
        resume = str(last)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = record.with_suffix(f".json.{os.getpid()}.tmp")  # DDP: every rank writes the same file
    tmp.write_text(json.dumps(settings, indent=1, sort_keys=True))
    tmp.replace(record)
    return resume
