"""The volume cut into an xy grid of blocks, and each block's Betti-0 and projections.

The Global Inspector looks at a volume the way the paper does: a z-maximum-intensity projection cut
into non-overlapping xy tiles (128 x 128 by default), each tile standing for the full-depth 3D region
below it. Betti-0 of a block is the number of 26-connected foreground components of that 3D region
(``cc3d``), so a tube that leaves the block and comes back counts twice; that is what the paper counts.
Whole-volume component labels are also kept, because a piece cut at a block border is not noise when
it continues in the neighbour block.

Leaf module: numpy and ``neurorefiner.topology`` (components counted by ``topology.components``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.topology.components import betti0, label_components

Slices = tuple[slice, slice, slice]
__all__ = ["Block", "BlockStats", "Slices", "all_block_stats", "betti0", "block_of_point", "block_stats",
           "centred_window", "expand", "grid_blocks", "label_components", "mip", "shift", "slices_from_list",
           "slices_to_list"]


@dataclass(frozen=True)
class Block:
    """One tile of the grid: an id (row-major from the top-left, 0-based) and its ZYX slices."""

    id: int
    slices: Slices
    row: int = 0
    col: int = 0

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(s.stop - s.start for s in self.slices)  # type: ignore[return-value]

    @property
    def origin(self) -> tuple[int, int, int]:
        return tuple(s.start for s in self.slices)  # type: ignore[return-value]

    def contains_xy(self, y: float, x: float) -> bool:
        sy, sx = self.slices[1], self.slices[2]
        return sy.start <= y < sy.stop and sx.start <= x < sx.stop

    def as_list(self) -> list[list[int]]:
        return [[s.start, s.stop] for s in self.slices]


def grid_blocks(shape: Sequence[int], block_size: Sequence[int] | int = 128, depth: int | None = None) -> list[Block]:
    """The xy grid over a (D, H, W) volume: tiles of ``block_size`` (y, x) pixels, edge tiles smaller.

    ``depth`` cuts z into chunks of that many slices as well (None = full depth, the paper's choice).
    """
    d, h, w = (int(s) for s in shape)
    by, bx = (int(block_size), int(block_size)) if np.isscalar(block_size) else (int(b) for b in block_size)
    if by < 1 or bx < 1:
        raise ValueError(f"block size must be positive, got {block_size}")
    bz = d if depth is None else int(depth)
    if bz < 1:
        raise ValueError(f"block depth must be positive or None, got {depth}")
    blocks: list[Block] = []
    for z0 in range(0, d, bz):
        for r, y0 in enumerate(range(0, h, by)):
            for c, x0 in enumerate(range(0, w, bx)):
                sl = (slice(z0, min(d, z0 + bz)), slice(y0, min(h, y0 + by)), slice(x0, min(w, x0 + bx)))
                blocks.append(Block(len(blocks), sl, r, c))
    return blocks


def block_of_point(blocks: Sequence[Block], zyx: Sequence[float]) -> Block | None:
    """The block that holds a voxel coordinate (None outside the grid)."""
    z, y, x = (float(v) for v in zyx)
    for b in blocks:
        if b.slices[0].start <= z < b.slices[0].stop and b.contains_xy(y, x):
            return b
    return None


def mip(volume: np.ndarray, axis: int = 0) -> np.ndarray:
    """Maximum-intensity projection along ``axis`` (0 = z gives the xy view, 2 = x gives the yz view)."""
    return np.asarray(volume).max(axis=axis)


@dataclass(frozen=True)
class BlockStats:
    """What the Inspector reads about one block."""

    block: Block
    betti0: int
    component_sizes: tuple[int, ...]     # largest first, within the block
    foreground: int
    global_labels: tuple[int, ...]       # whole-volume component ids present in the block

    def as_dict(self) -> dict:
        return {"block": self.block.id, "betti0": self.betti0, "foreground": self.foreground,
                "component_sizes": list(self.component_sizes[:20])}


def block_stats(mask: np.ndarray, block: Block, global_labels: np.ndarray | None = None) -> BlockStats:
    """Betti-0 and component sizes of the block's 3D region (and which whole-volume components it holds)."""
    sub = np.asarray(mask[block.slices], dtype=bool)
    labels, n = label_components(sub)
    sizes = np.bincount(labels.ravel())[1:] if n else np.zeros(0, np.int64)
    present: tuple[int, ...] = ()
    if global_labels is not None and n:
        present = tuple(int(v) for v in np.unique(global_labels[block.slices][sub]))
    return BlockStats(block, n, tuple(int(s) for s in sorted(sizes.tolist(), reverse=True)), int(sub.sum()),
                      present)


def all_block_stats(mask: np.ndarray, blocks: Sequence[Block],
                    global_labels: np.ndarray | None = None) -> list[BlockStats]:
    return [block_stats(mask, b, global_labels) for b in blocks]


def expand(slices: Slices, halo: Sequence[int] | int, shape: Sequence[int]) -> Slices:
    """``slices`` grown by ``halo`` voxels per axis and clipped to ``shape``."""
    hz, hy, hx = (int(halo),) * 3 if np.isscalar(halo) else (int(h) for h in halo)
    return tuple(slice(max(0, s.start - h), min(int(n), s.stop + h))  # type: ignore[return-value]
                 for s, h, n in zip(slices, (hz, hy, hx), shape))


def centred_window(centre: Sequence[float], size: Sequence[int], shape: Sequence[int]) -> Slices:
    """A window of ``size`` around ``centre`` kept inside ``shape`` (shrunk only where the volume is smaller)."""
    out = []
    for c, s, n in zip(centre, size, shape):
        s, n = int(s), int(n)
        if s >= n:
            out.append(slice(0, n))
            continue
        lo = int(round(float(c) - s / 2.0))
        lo = min(max(lo, 0), n - s)
        out.append(slice(lo, lo + s))
    return tuple(out)  # type: ignore[return-value]


def shift(slices: Slices, offset: Sequence[int]) -> Slices:
    """Slices moved by ``offset`` (e.g. from volume coordinates into a region's own)."""
    return tuple(slice(s.start + int(o), s.stop + int(o)) for s, o in zip(slices, offset))  # type: ignore


def slices_to_list(slices: Slices) -> list[list[int]]:
    return [[int(s.start), int(s.stop)] for s in slices]


def slices_from_list(bounds: Sequence[Sequence[int]]) -> Slices:
    return tuple(slice(int(a), int(b)) for a, b in bounds)  # type: ignore[return-value]
