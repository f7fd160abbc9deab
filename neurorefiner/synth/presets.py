"""Synthetic benchmark presets that stand in for the paper's datasets, and the cached datasets built
from them (``get_dataset("synthetic_cwmbs_weak")``).

Each preset copies what the paper states about the benchmark it replaces (volume size, voxel size,
what makes it hard) and invents the rest; the comments say which is which. Volumes are generated on
first use into ``data/cache/synth/<preset>/<split>/`` with a ``manifest.json``; a manifest whose
generator version, parameters or seed differ is regenerated. Everything they produce is SYNTHETIC and
is named so (``synthetic_*``, ``Case.info["synthetic"]``).
"""

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

log = logging.getLogger(__name__)

PRESETS: dict[str, SynthParams] = {
    # Tests' preset: a few 64^3 stacks in well under a second each; every difficulty is present.
    "tiny": SynthParams(
        name="tiny", shape=(64, 64, 64), spacing=(1.0, 0.5, 0.5), morphology="mixed", real_fraction=0.25,
        soma_prob=0.4, n_dendrites=(2, 3), dendrite_length=(15.0, 35.0), soma_radius_um=(1.5, 2.5),
        min_length=40.0,
        signal=(50.0, 90.0), weak_rate=(1.5, 2.5), n_fibres=(1, 2), n_somata=(0, 1),
        blob_density=(20.0, 50.0), blob_signal=(0.3, 1.0), bit_depth=8),
    # CWMBS (paper, Sec. 4.1): whole-brain mouse imaging, 256x256x256 voxels at 0.2 x 0.2 x 1 um;
    # 162 volumes of thin filamentary structures with weak signals. Invented: 16-bit camera model,
    # intensity levels, mostly passing axons (whole-brain crops rarely hold a soma).
    "synthetic_cwmbs_weak": SynthParams(
        name="synthetic_cwmbs_weak", shape=(256, 256, 256), spacing=(1.0, 0.2, 0.2), morphology="mixed",
        real_fraction=0.2, soma_prob=0.15, radius=(0.5, 1.5), dendrite_length=(60.0, 160.0),
        min_length=400.0, signal=(16.0, 30.0), weak_rate=(0.8, 1.6), weak_snr=(0.0, 1.5),
        background=(3.0, 6.0), tissue_contrast=(0.2, 0.4), neuropil=(0.0, 1.5), n_fibres=(1, 3),
        fibre_signal=(0.3, 0.9), n_somata=(0, 1), blob_density=(5.0, 20.0), read_noise=(1.0, 2.0),
        gain=4.0, offset=100.0, bit_depth=16),
    # CWMBS (paper): 83 volumes with strong background noise; same size and voxel size as above.
    # Invented: the noise levels (bright, textured tissue; many blobs; high read noise).
    "synthetic_cwmbs_noise": SynthParams(
        name="synthetic_cwmbs_noise", shape=(256, 256, 256), spacing=(1.0, 0.2, 0.2), morphology="mixed",
        real_fraction=0.2, soma_prob=0.25, radius=(0.5, 2.5), dendrite_length=(60.0, 160.0),
        min_length=400.0, signal=(140.0, 240.0), weak_rate=(0.4, 0.8), background=(15.0, 30.0),
        tissue_contrast=(0.5, 0.9), neuropil=(3.0, 8.0), n_fibres=(2, 5), n_somata=(1, 3),
        blob_density=(60.0, 150.0), read_noise=(2.0, 4.0), gain=4.0, offset=100.0, bit_depth=16),
    # ZBFWB (paper): confocal stacks of 6-day-old zebrafish larvae, 1000 x 2000 x 250 voxels at
    # 0.5 x 0.5 x 1 um; low contrast, long-range axonal projections, intricate network topologies.
    # Default field 128 x 512 x 512 (CPU); shape= up to (250, 2000, 1000). Real morphology: the ZBFWB
    # GT.swc (held out to the test split). Invented: intensity levels, 8-bit camera.
    "synthetic_zbfwb": SynthParams(
        name="synthetic_zbfwb", shape=(128, 512, 512), spacing=(1.0, 0.5, 0.5), morphology="mixed",
        real_fraction=0.3, real_sources=("zbfwb",), real_fit=(0.8, 1.6), soma_prob=0.3,
        axon_length=(1.5, 3.0), tortuosity_axon=0.08, branch_prob_axon=0.012, arbor_prob=0.7, radius=(0.5, 2.0),
        min_length=400.0, signal=(25.0, 45.0), weak_rate=(0.5, 1.0), background=(12.0, 22.0),
        tissue_contrast=(0.6, 1.0), tissue_scale=20.0, neuropil=(2.0, 5.0), n_fibres=(4, 10),
        fibre_signal=(0.5, 1.2), n_somata=(1, 4), blob_density=(20.0, 50.0), read_noise=(1.5, 3.0),
        gain=2.0, bit_depth=8),
    # BigNeuron (paper): expert gold reconstructions of many species from different labs and
    # microscopes, varying in appearance, resolution and scale. Morphology: the 114 real Gold166 trees
    # (split by id: 70 % train, 10 % val, 20 % test), rescaled to the field. Invented: one voxel size
    # (0.38 um isotropic, the most common in Gold166), the contrast and noise ranges.
    "synthetic_bigneuron": SynthParams(
        name="synthetic_bigneuron", shape=(128, 256, 256), spacing=(0.38, 0.38, 0.38), morphology="real",
        real_sources=("bigneuron",), real_fit=(0.6, 1.4), radius=(0.5, 3.0), min_length=300.0,
        signal=(20.0, 150.0), weak_rate=(0.3, 1.0), background=(2.0, 20.0), tissue_contrast=(0.1, 0.8),
        neuropil=(0.0, 4.0), n_fibres=(0, 3), n_somata=(0, 2), blob_density=(5.0, 30.0), blob_signal=(0.2, 0.8),
        read_noise=(0.5, 4.0), gain=2.0, bit_depth=8),
}

DEFAULT_COUNTS = {  # (train, val, test); the paper's CWMBS has 162 weak : 83 noisy volumes (about 2 : 1)
    "tiny": (4, 2, 2),
    "synthetic_cwmbs_weak": (16, 4, 8),
    "synthetic_cwmbs_noise": (8, 2, 4),
    "synthetic_zbfwb": (8, 2, 4),
    "synthetic_bigneuron": (16, 4, 8),
}

SPLIT_CODE = {"train": 0, "val": 1, "test": 2}


def preset_params(name: str) -> SynthParams:
    if name not in PRESETS:
        raise InputError(f"unknown synthetic preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


def volume_seed(seed: int, split: str, index: int) -> int:
    """Independent seeds per (dataset seed, split, index): splits never share a volume."""
    return int(np.random.SeedSequence([int(seed), SPLIT_CODE[split], int(index)]).generate_state(1)[0])


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
                 progress: bool = True):
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
