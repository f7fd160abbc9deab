"""BigNeuron Gold166 gold reconstructions (114 ids, no images) and 51 BigNeuron APP2 results.

Used as real morphologies for the synthetic renderer and as real (gold, APP2) pairs for the metrics.
Voxel sizes come from ``index.csv`` (xy_um, z_um).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import check_split, register
from neurorefiner.errors import InputError
from neurorefiner.paths import data_dir


@dataclass(frozen=True)
class GoldEntry:
    id: str
    dataset: str
    organism: str
    planar: str
    xy_um: float
    z_um: float
    gold: Path
    gold_nodes: int
    app2: Path | None

    @property
    def spacing(self) -> tuple[float, float, float]:
        return (self.z_um, self.xy_um, self.xy_um)


class BigNeuronGold:
    """Morphology-only dataset: cases have a gold SWC (and ``info['app2']``), no image."""

    name = "bigneuron_gold"
    splits = ("all", "with_app2", "3d")

    def __init__(self, root: str | Path | None = None, name: str = "bigneuron_gold", synthetic: bool = False):
        self.synthetic = bool(synthetic)  # the config says whether outputs are labelled SYNTHETIC
        self.root = Path(root) if root else data_dir() / "bigneuron_gold"
        index = self.root / "index.csv"
        if not index.exists():
            raise InputError("index.csv not found; BigNeuron gold SWCs ship with the repository", index)
        self.entries = self._read_index(index)

    def _read_index(self, index: Path) -> list[GoldEntry]:
        out = []
        with open(index, newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    out.append(GoldEntry(
                        id=row["id"], dataset=row["dataset"], organism=row["organism"], planar=row["planar"],
                        xy_um=float(row["xy_um"]), z_um=float(row["z_um"]), gold=self.root / row["gold"],
                        gold_nodes=int(row["gold_nodes"]),
                        app2=self.root / row["app2"] if row.get("app2") else None))
                except (KeyError, ValueError) as exc:
                    raise InputError(f"bad row {row}: {exc}", index) from exc
        return out

    def cases(self, split: str = "all") -> list[Case]:
        check_split(self.name, split, self.splits)
        entries = self.entries
        if split == "with_app2":
            entries = [e for e in entries if e.app2 is not None]
        elif split == "3d":
            entries = [e for e in entries if e.planar.upper() == "3D"]
        return [Case(e.id, self.name, split, None, e.gold, spacing=e.spacing,
                     info={"organism": e.organism, "source": e.dataset, "app2": e.app2, "planar": e.planar})
                for e in entries]


register("bigneuron_gold")(BigNeuronGold)
