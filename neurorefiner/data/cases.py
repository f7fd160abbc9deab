"""One evaluation/training case: an image stack with its gold reconstruction and/or label mask."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurorefiner.io.stacks import read_mask, read_volume
from neurorefiner.io.swc import Tree, read_swc
from neurorefiner.io.volume import Spacing, Volume


@dataclass
class Case:
    """A volume of a dataset. Paths are read lazily; ``spacing`` (z, y, x, um) overrides file metadata
    where the dataset documents its voxel size (e.g. DIADEM TIFFs carry none)."""

    name: str
    dataset: str
    split: str
    image_path: Path | None
    swc_path: Path | None = None
    label_path: Path | None = None
    spacing: Spacing | None = None
    label_radius: float | None = None  # fixed tube radius (x voxels) when rasterising gold; None = SWC radii
    info: dict = field(default_factory=dict)

    def image(self) -> Volume:
        if self.image_path is None:
            raise FileNotFoundError(f"{self.dataset}/{self.name} has no image (morphology-only dataset)")
        vol = read_volume(self.image_path)
        if self.spacing is not None:
            vol.spacing = self.spacing
        return vol

    def gold(self) -> Tree:
        if self.swc_path is None:
            raise FileNotFoundError(f"{self.dataset}/{self.name} has no gold SWC")
        return read_swc(self.swc_path)

    def label(self, shape: tuple[int, int, int] | None = None) -> np.ndarray:
        """Gold mask: the label file, or the gold SWC rasterised into the image's grid."""
        if self.label_path is not None:
            return read_mask(self.label_path).load()
        if shape is None:
            shape = self.image().shape
        return self.gold().rasterize(shape, self.spacing or (1.0, 1.0, 1.0), radius=self.label_radius,
                                     strict=False)
