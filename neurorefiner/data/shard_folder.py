"""What shapes a folder of sample shards, recorded in it, and the check that a run builds only on its own folder.

Why: ``make-shards`` run again into a finished folder with another ``--shard-size`` or ``--dataset`` used to exit 0
and write a manifest of shards the folder did not hold (the reader saw 128 samples where the manifest said 512, or
a manifest naming ``tiny`` over DIADEM samples): training on it trained on data nobody asked for. Now the folder's
``settings.json`` holds every setting that shapes its samples (:func:`folder_record`: the sample settings of
:class:`ShardSettings`, the datasets, part, segmenters, cases found, number of samples, shard size and the
instruction writer's version) and :func:`claim_folder` refuses a run whose record differs, naming each option
(one line, exit code 2 from the CLI). Only the same run continues an interrupted folder.

Light on purpose (no torch, no numpy): the CLI checks its options with :class:`ShardSettings` before the heavy
imports of :mod:`neurorefiner.data.sample_shards` (the format and reader, which re-exports these names).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError

Triple = tuple[int, int, int]
OPS = ("connect", "remove", "cut")
VARIANTS = ("correct", "wrong_place", "opposite")
PARTS = ("train", "val")  # the cases a folder is made of; test cases are never trained on
SETTINGS = "settings.json"
MANIFEST = "manifest.json"
_WRITER_FILES = ("defects/describe.py", "topology/instructions.py", "topology/positions.py")

#: how a user sets each recorded value, for the refusal (the ``neurorefiner make-shards`` options)
OPTIONS = {"stage": "--stage", "datasets": "--dataset", "part": "--part", "segmenters": "--segmenter",
           "n_samples": "--n", "shard_size": "--shard-size", "crop_size": "--crop", "op_shares": "--ops",
           "variant_shares": "--variants", "distractor_prob": "--distractor-prob", "seed": "--seed",
           "faint_gap": "--faint-gap", "faint_contrast": "--faint-contrast",
           "sources": "the cases (and initial masks) found", "writer_version": "the instruction writer"}
#: recorded since every setting is; a folder made before has them only through its manifest, or implied by its sources
_NEWER = ("datasets", "part", "segmenters", "n_samples", "shard_size", "sources", "writer_version")


def writer_version() -> str:
    """Version of the instruction writer: a hash of the describing functions' source files. Stored in each
    manifest; the reader warns when the writer changed since (and writes the instructions anew anyway)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for rel in _WRITER_FILES:
        h.update((root / rel).read_bytes())
    return f"describe@{h.hexdigest()[:12]}"


@dataclass
class ShardSettings:
    """How a set of shards is made (stored in the manifest). A value out of range is a ``ValueError`` naming the
    field (the CLI names the option)."""

    stage: int = 1
    crop_size: Triple = (32, 64, 64)
    op_shares: dict = field(default_factory=lambda: {"connect": 0.4, "remove": 0.3, "cut": 0.3})
    variant_shares: dict = field(default_factory=lambda: {"correct": 0.6, "wrong_place": 0.2, "opposite": 0.2})
    distractor_prob: float = 0.3  # stage 1: a second, unnamed defect the target keeps
    seed: int = 0
    faint_gap: float = 0.0  # stage 1: share of breaks whose image is made faint across the gap (defects.breaks.dim_gap)
    faint_contrast: tuple = (0.1, 0.6)  # the gap's contrast, drawn uniformly from this range

    def stamp(self) -> dict:
        """The settings that make the samples, as stored; options at their off default are left out, so a folder
        made before they existed matches."""
        out = asdict(self)
        if not self.faint_gap:
            out.pop("faint_gap")
            out.pop("faint_contrast")
        return out

    def __post_init__(self) -> None:
        self.crop_size = tuple(int(s) for s in self.crop_size)  # type: ignore[assignment]
        for name, shares, known in (("op_shares", self.op_shares, OPS), ("variant_shares", self.variant_shares,
                                                                           VARIANTS)):
            bad = set(shares) - set(known)
            if bad or any(float(v) < 0 for v in shares.values()) or sum(map(float, shares.values())) <= 0:
                raise ValueError(f"{name} must give shares >= 0 (not all 0) of {known}, got {dict(shares)}")
        if len(self.crop_size) != 3 or min(self.crop_size) < 6:
            raise ValueError(f"crop_size must be three sizes >= 6 (D, H, W), got {self.crop_size}")
        if not 0.0 <= float(self.distractor_prob) <= 1.0:
            raise ValueError(f"distractor_prob must be in [0, 1], got {self.distractor_prob}")
        if int(self.seed) < 0:  # numpy's generators take no negative seed: it would fail in every worker
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        self.faint_contrast = tuple(float(c) for c in self.faint_contrast)
        lo, hi = self.faint_contrast if len(self.faint_contrast) == 2 else (-1.0, -1.0)
        if not 0.0 <= float(self.faint_gap) <= 1.0 or not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"faint_gap must be in [0, 1] and faint_contrast (low, high) within [0, 1], got "
                             f"{self.faint_gap}, {self.faint_contrast}")


def folder_record(settings: ShardSettings, n_samples: int, shard_size: int, sources: Sequence[str] = (),
                  recipe: Mapping[str, Any] | None = None) -> dict:
    """Everything that shapes a folder's samples, as ``settings.json`` stores it: the sample settings (flat, as
    the reader reads ``variant_shares``), the sample count, shard size, the cases found (``sources``), the
    instruction writer and ``recipe`` (what the maker was asked for: datasets, part, segmenters)."""
    record = {**settings.stamp(), "n_samples": int(n_samples), "shard_size": int(shard_size),
              "sources": list(sources), "writer_version": writer_version(), **dict(recipe or {})}
    return json.loads(json.dumps(record, default=list))  # tuples as lists: the form it is read back in


def claim_folder(out: Path, wanted: dict) -> None:
    """Make ``out`` the folder of the run ``wanted`` describes (:func:`folder_record`) or refuse it: a folder
    recorded with other settings, or one holding other files, is an :class:`InputError` naming the options that
    differ, and nothing is written. A folder of the same run is kept as it is (its finished shards are reused)."""
    from neurorefiner.io.atomic import write_text_atomic

    path = out / SETTINGS
    if path.exists():
        try:
            recorded = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"unreadable ({exc}); delete the folder or choose another --out", path) from None
        if not isinstance(recorded, dict):
            raise InputError("not a record of shard settings; delete the folder or choose another --out", path)
        changed = differences(_with_manifest(recorded, out, wanted), wanted)
        if changed:
            raise InputError(f"holds shards made with other settings ({'; '.join(changed)}); choose another --out "
                             "or delete the folder", out)
        if recorded == wanted:
            return
    elif out.is_dir() and any(out.iterdir()):
        raise InputError(f"holds files but no {SETTINGS}: not a folder of sample shards; choose another --out", out)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(wanted, sort_keys=True))


def differences(recorded: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """``--option new (the folder's: old)`` for each setting of ``wanted`` that ``recorded`` holds otherwise. A
    setting a folder made before it was recorded lacks is implied by its sources, when those are recorded; the
    sources are named only when no option explains them (new masks found, cases of a dataset changed)."""
    keys = [k for k in sorted(set(recorded) | set(wanted)) if recorded.get(k) != wanted.get(k)
            and not (k not in recorded and k in _NEWER and recorded.get("sources") is not None)]
    if len(keys) > 1 and "sources" in keys:
        keys.remove("sources")
    return [f"{OPTIONS.get(k, k)} {_text(wanted.get(k), 'unset')} "
            f"(the folder's: {_text(recorded.get(k), 'not recorded')})" for k in keys]


def _with_manifest(recorded: dict, out: Path, wanted: Mapping[str, Any]) -> dict:
    """A record from before every setting was recorded, completed from the folder's manifest where it has one;
    without one nothing says what its samples hold, and :func:`differences` refuses it. The manifest holds the
    shards' sizes, not the shard size: the wanted one stands when it makes the same shards."""
    if "n_samples" in recorded or not (out / MANIFEST).exists():
        return recorded
    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return recorded
    n, size, sizes = manifest.get("n_samples"), int(wanted.get("shard_size") or 1), manifest.get("sizes") or [0]
    same = isinstance(n, int) and sizes == [min(size, n - i) for i in range(0, n, size)]
    return {**recorded, "n_samples": n, "shard_size": size if same else sizes[0],
            "sources": manifest.get("sources"), "writer_version": manifest.get("writer_version")}


def _text(value: Any, none: str) -> str:
    if value is None:
        return none
    if isinstance(value, list):
        return ",".join(map(str, value)) if len(value) <= 6 else f"{len(value)} items"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)
