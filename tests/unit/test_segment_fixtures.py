"""A tiny in-test dataset for the segmentation tests: a few small stacks with bright tubes along known
SWC paths, their label masks, and a Dataset object with dev/test splits (like DIADEM)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.data.cases import Case
from neurorefiner.io import write_volume
from neurorefiner.io.swc import Tree, write_swc


def make_stack(rng: np.random.Generator, shape=(20, 40, 40)) -> tuple[np.ndarray, Tree]:
    """A bent tube from one side to another, bright on a dim noisy background (uint8)."""
    z0, y0, x0 = shape[0] // 2, int(rng.integers(5, shape[1] - 5)), 2
    pts = []
    for i in range(12):
        pts.append((z0 + (i % 3) - 1, y0 + i * (shape[1] - 2 * y0 // 2) // 40, x0 + i * (shape[2] - 5) // 12))
    zyx = np.clip(np.array(pts, float), 1, np.array(shape) - 2)
    tree = Tree.from_points(zyx, np.arange(-1, len(zyx) - 1), radius=1.5)
    label = tree.rasterize(shape, (1.0, 1.0, 1.0), strict=False)
    image = (rng.normal(10, 3, shape) + 120 * label).clip(0, 255).astype(np.uint8)
    return image, tree


class TinyDataset:
    name = "tiny_fixture"
    splits = ("dev", "test", "all")

    def __init__(self, root: Path, n_dev: int = 3, n_test: int = 1, shape=(20, 40, 40), seed: int = 0,
                 name: str = "tiny_fixture"):
        self.name = name
        root = Path(root)
        rng = np.random.default_rng(seed)
        self.items: dict[str, list[Case]] = {"dev": [], "test": []}
        for split, n in (("dev", n_dev), ("test", n_test)):
            for i in range(n):
                name = f"{split}_{i}"
                image, tree = make_stack(rng, shape)
                ip, sp, lp = root / f"{name}.tif", root / f"{name}.swc", root / f"{name}_label.tif"
                write_volume(ip, image, spacing=(1.0, 1.0, 1.0))
                write_swc(sp, tree)
                write_volume(lp, tree.rasterize(shape, (1.0, 1.0, 1.0), strict=False))
                self.items[split].append(Case(name, self.name, split, ip, sp, lp, spacing=(1.0, 1.0, 1.0)))

    def cases(self, split: str = "test") -> list[Case]:
        if split == "all":
            return self.items["dev"] + self.items["test"]
        return list(self.items[split])
