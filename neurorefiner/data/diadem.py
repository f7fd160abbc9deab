"""DIADEM Olfactory Projection fibres OP_1-OP_9: real confocal stacks with gold SWCs (bundled).

Split: ``dev`` = OP_1-OP_6 (train and tune here), ``test`` = OP_7-OP_9 (held out: report only).
"""

from __future__ import annotations

from pathlib import Path

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import check_split, register
from neurorefiner.errors import InputError
from neurorefiner.paths import data_dir

SPLITS = {"dev": (1, 2, 3, 4, 5, 6), "test": (7, 8, 9)}
SPLITS["all"] = SPLITS["dev"] + SPLITS["test"]
SPACING = (1.0, 0.33, 0.33)  # z, y, x in um (DIADEM OP documentation)


class DiademDataset:
    name = "diadem"
    splits = ("dev", "test", "all")

    def __init__(self, root: str | Path | None = None, label_radius: float | None = 1.5, name: str = "diadem",
                 synthetic: bool = False):
        self.synthetic = bool(synthetic)  # the config says whether outputs are labelled SYNTHETIC
        self.root = Path(root) if root else data_dir() / "diadem_op"
        self.label_radius = label_radius
        if not self.root.is_dir():
            raise InputError("DIADEM folder not found; it ships with the repository (data/diadem_op/)",
                             self.root)

    def cases(self, split: str = "test") -> list[Case]:
        check_split(self.name, split, self.splits)
        return [Case(f"OP_{k}", self.name, "test" if k in SPLITS["test"] else "dev",
                     self.root / f"OP_{k}.tif", self.root / f"OP_{k}.swc", spacing=SPACING,
                     label_radius=self.label_radius)
                for k in SPLITS[split]]


register("diadem")(DiademDataset)


def dev_cases(names: list[str] | None = None, purpose: str = "this command") -> list[Case]:
    """DIADEM development stacks (OP_1-OP_6), all or the ones ``names`` lists; naming a held-out test stack
    (or any other) is an :class:`InputError` that says ``purpose`` takes development stacks only."""
    from neurorefiner.data.registry import get_dataset

    dev = get_dataset("diadem").cases("dev")
    if names is None:
        return dev
    unknown = set(names) - {c.name for c in dev}
    if unknown:
        raise InputError(f"{purpose} takes DIADEM dev stacks only (OP_1-OP_6), not {sorted(unknown)}")
    return [c for c in dev if c.name in names]
