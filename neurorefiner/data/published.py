"""Readers for the paper's published benchmarks: BigNeuron, CWMBS and ZBFWB.

They cannot be downloaded here; a user who has them puts them under ``data/<name>/`` in this layout
(documented in data/README.md)::

    data/<name>/
      images/<case>.tif | .v3draw        the raw stack
      swc/<case>.swc                     gold reconstruction (voxel coordinates)
      labels/<case>.tif                  optional binary label mask
      splits.json                        {"train": [case, ...], "test": [case, ...]}  (optional)
      spacing.json                       {"spacing": [z, y, x]} in um (optional; else the default below)

Without the folder, asking for a case raises a message saying exactly that and naming the SYNTHETIC stand-in
to run instead (``python evaluate.py dataset=zbfwb`` is often the first line a user types), never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import check_split, register
from neurorefiner.errors import InputError
from neurorefiner.paths import data_dir

LAYOUT_HELP = ("put the dataset under {root} as images/<case>.tif (or .v3draw), swc/<case>.swc, "
               "optional labels/<case>.tif and splits.json {{\"train\": [...], \"test\": [...]}}; "
               "see data/README.md")
STAND_INS = {"bigneuron": "synthetic_bigneuron", "zbfwb": "synthetic_zbfwb", "cwmbs": "synthetic_cwmbs_weak",
             "cwmbs/weak": "synthetic_cwmbs_weak", "cwmbs/noise": "synthetic_cwmbs_noise"}

DEFAULT_SPACING = {
    "bigneuron": (1.0, 1.0, 1.0),  # varies per image; give spacing.json or per-case TIFF metadata
    "cwmbs": (1.0, 0.2, 0.2),  # 0.2 x 0.2 x 1 um (ADTL-Net paper)
    "zbfwb": (1.0, 0.5, 0.5),  # 0.5 x 0.5 x 1 um (NeuroRefiner paper)
}


class PublishedDataset:
    splits = ("train", "test", "all")

    def __init__(self, name: str, root: str | Path | None = None, subset: str | None = None,
                 synthetic: bool = False):
        self.name = name
        self.synthetic = bool(synthetic)  # the config says whether outputs are labelled SYNTHETIC
        self.root = Path(root) if root else data_dir() / name
        self.subset = subset  # CWMBS: "weak" or "noise" sub-folder

    @property
    def base(self) -> Path:
        return self.root / self.subset if self.subset else self.root

    @property
    def stand_in(self) -> str | None:
        """The config name of this dataset's SYNTHETIC stand-in (conf/dataset/), for users without the data."""
        return STAND_INS.get(f"{self.name}/{self.subset}" if self.subset else self.name, STAND_INS.get(self.name))

    def _require(self) -> None:
        if not (self.base / "images").is_dir():
            instead = (f"; without the data, use its SYNTHETIC stand-in: dataset={self.stand_in} "
                       "(docs/synthetic_data.md)"
                       if self.stand_in else "")
            raise InputError(f"the {self.name} dataset is not here (its images are not redistributable); "
                             + LAYOUT_HELP.format(root=self.base) + instead, self.base)

    def cases(self, split: str = "test") -> list[Case]:
        check_split(self.name, split, self.splits)
        self._require()
        images = {p.stem: p for p in sorted((self.base / "images").iterdir())
                  if p.suffix.lower() in (".tif", ".tiff", ".v3draw", ".v3dpbd")}
        names = sorted(images)
        split_file = self.base / "splits.json"
        if split != "all" and split_file.exists():
            try:
                names = list(json.loads(split_file.read_text())[split])
            except (KeyError, json.JSONDecodeError) as exc:
                raise InputError(f"splits.json has no valid {split!r} list: {exc}", split_file) from exc
        spacing = DEFAULT_SPACING.get(self.name, (1.0, 1.0, 1.0))
        sp_file = self.base / "spacing.json"
        if self.name not in DEFAULT_SPACING and not sp_file.exists():  # a lab's own stacks: no size is guessed
            raise InputError('give the voxel size as spacing.json {"spacing": [z, y, x]} in um', sp_file)
        if sp_file.exists():
            spacing = tuple(json.loads(sp_file.read_text())["spacing"])
        out = []
        for n in names:
            if n not in images:
                raise InputError(f"case {n!r} from splits.json has no image in images/", split_file)
            swc = self.base / "swc" / f"{n}.swc"
            lab = self.base / "labels" / f"{n}.tif"
            out.append(Case(n, self.name, split, images[n], swc if swc.exists() else None,
                            lab if lab.exists() else None, spacing=spacing))
        return out


register("bigneuron")(lambda root=None: PublishedDataset("bigneuron", root))
register("cwmbs")(lambda root=None, subset=None: PublishedDataset("cwmbs", root, subset))
register("zbfwb")(lambda root=None: PublishedDataset("zbfwb", root))
# a lab's own traced stacks in the same layout under data/own/ (what `neurorefiner adapt --dataset own` learns from)
register("own")(lambda root=None: PublishedDataset("own", root))
