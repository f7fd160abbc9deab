"""The synthetic presets as registry datasets (``get_dataset("synthetic_cwmbs_weak")``), generated on first
use into ``data/cache/synth/<preset>/<split>/`` with a ``manifest.json``; a manifest whose generator version,
parameters or seed differ is regenerated. Everything they produce is SYNTHETIC and is named so
(``synthetic_*``, ``Case.info["synthetic"]``)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import check_split, register
from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path
from neurorefiner.synth.params import GENERATOR_VERSION, SynthParams
from neurorefiner.synth.presets import DEFAULT_COUNTS, PRESETS, preset_params, volume_seed

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One generator per cache folder at a time (parallel test workers share the cache)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        try:
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - not on Windows
            pass
        yield


class SyntheticDataset:
    """A synthetic preset as a dataset with train/val/test splits, generated once and cached."""

    splits = ("train", "val", "test")

    def __init__(self, name: str, n_train: int | None = None, n_val: int | None = None,
                 n_test: int | None = None, seed: int = 0, shape: tuple[int, int, int] | list[int] | None = None,
                 root: str | Path | None = None, params: dict[str, Any] | None = None,
                 progress: bool = True, synthetic: bool = True):
        self.synthetic = bool(synthetic)  # what outputs label SYNTHETIC (conf/dataset/*.yaml says it, no name test)
        base = preset_params(name)
        changes = dict(params or {})
        if shape is not None:
            changes["shape"] = tuple(shape)
        self.params = SynthParams.from_dict(changes, base=base) if changes else base
        self.name = name
        counts = DEFAULT_COUNTS[name]
        self.counts = {}
        for split, given, default in zip(self.splits, (n_train, n_val, n_test), counts):
            n = default if given is None else given
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise InputError(f"n_{split} must be a non-negative integer, got {n!r}", f"dataset {name}")
            self.counts[split] = int(n)
        from neurorefiner.synth.render import check_seed

        self.seed = check_seed(seed)
        if root is None:
            from neurorefiner.paths import cache_dir

            root = cache_dir() / "synth" / name
        self.root = Path(root)
        self.progress = progress

    def __repr__(self) -> str:
        return f"SyntheticDataset({self.name!r}, counts={self.counts}, seed={self.seed}, root={str(self.root)!r})"

    def split_params(self, split: str) -> SynthParams:
        """The preset with real trees restricted to this split's pool (no tree in two splits)."""
        return self.params.replace(real_pool=split)

    def cases(self, split: str = "test") -> list[Case]:
        check_split(self.name, split, self.splits)
        folder = self.root / split
        n = self.counts[split]
        if n == 0:
            return []
        with _locked(folder):
            entries = self._ensure(folder, split, n)
        return [Case(e["name"], self.name, split, folder / e["image"], folder / e["gold"], folder / e["label"],
                     spacing=tuple(e["spacing"]), label_radius=None,
                     info={"synthetic": True, "preset": self.name, "seed": e["seed"],
                           "morphology": e["morphology"]})
                for e in entries[:n]]

    # ------------------------------------------------------------------ cache
    def _manifest_header(self, split: str) -> dict[str, Any]:
        return {"generator_version": GENERATOR_VERSION, "preset": self.name, "split": split, "seed": self.seed,
                "params": self.split_params(split).to_dict(), "synthetic": True}

    def _ensure(self, folder: Path, split: str, n: int) -> list[dict]:
        header = self._manifest_header(split)
        manifest_path = folder / "manifest.json"
        entries: list[dict] = []
        if manifest_path.exists():
            try:
                old = json.loads(manifest_path.read_text())
            except json.JSONDecodeError:
                old = {}
            if {k: old.get(k) for k in header} == header:
                entries = [e for e in old.get("volumes", [])
                           if all((folder / e[k]).exists() for k in ("image", "label", "gold"))]
            else:
                log.info("synthetic %s/%s: generator or parameters changed; regenerating", self.name, split)
                for p in folder.glob("*_image.tif"):
                    p.unlink()
                for p in folder.glob("*_label.tif"):
                    p.unlink()
                for p in folder.glob("*_gold.swc"):
                    p.unlink()
        have = {e["index"]: e for e in entries}
        todo = [i for i in range(n) if i not in have]
        if todo:
            from neurorefiner.synth.writer import write_rendering

            params = self.split_params(split)
            it: Any = todo
            if self.progress:
                from tqdm import tqdm

                it = tqdm(todo, desc=f"synthesising {self.name}/{split}", unit="vol")
            for i in it:
                s = volume_seed(self.seed, split, i)
                name = f"{self.name}_{split}_{i:03d}"
                info = write_rendering(folder, name, params, s)
                have[i] = {"index": i, "name": name, "seed": s, "image": f"{name}_image.tif",
                           "label": f"{name}_label.tif", "gold": f"{name}_gold.swc",
                           "spacing": list(params.spacing), "morphology": info["morphology"],
                           "attempt": info["attempt"]}
            manifest = dict(header, volumes=[have[i] for i in sorted(have)])
            with atomic_path(manifest_path) as tmp:
                tmp.write_text(json.dumps(manifest, indent=1))
        return [have[i] for i in range(n)]


def _factory(name: str):
    def make(**kwargs: Any) -> SyntheticDataset:
        return SyntheticDataset(name, **kwargs)

    make.__name__ = f"make_{name}"
    return make


for _name in PRESETS:
    register(_name)(_factory(_name))
