"""The tile plan: which box of the volume each task refines and which larger box (tile + halo) it reads.

Why the alignments: a tile's interior is a whole number of output Zarr chunks (no chunk is written by two
tasks, so no locks), and the tile and its halo are whole numbers of the loop's blocks in y and x (and in z when
``block_depth`` cuts z), so the blocks a task sees are exactly the blocks the in-memory run would see there.
A volume that fits in one tile is therefore refined exactly as ``executor=local`` refines it.

Empty space is free: :class:`Occupancy` holds, per chunk of the input mask, the box around its foreground (taken
in the run's one chunked pass over the mask, so it costs no extra read), and :func:`occupied` keeps the tiles
whose region (tile + halo) meets one of those boxes. A tile whose region holds no foreground is never scheduled:
its output is empty (the mask is empty there, and the loop adds nothing to an empty region), so its chunks are
simply never written and read as 0. The test is conservative (a box is larger than its foreground), never wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.topology.blocks import Slices


@dataclass(frozen=True)
class Tile:
    """One task's share: ``interior`` (what it commits) inside ``region`` (what it reads), volume coordinates."""

    id: int
    interior: Slices
    region: Slices

    @property
    def interior_in_region(self) -> Slices:
        return tuple(slice(i.start - r.start, i.stop - r.start)  # type: ignore[return-value]
                     for i, r in zip(self.interior, self.region))

    def as_dict(self) -> dict:
        return {"tile": self.id, "interior": [[s.start, s.stop] for s in self.interior],
                "region": [[s.start, s.stop] for s in self.region]}


def _three(name: str, value: Sequence[int] | int) -> tuple[int, int, int]:
    v = (int(value),) * 3 if isinstance(value, int) else tuple(int(x) for x in value)
    if len(v) != 3 or any(x < 0 for x in v):
        raise InputError(f"executor.{name} must be three non-negative numbers (z, y, x), got {list(v)}")
    return v  # type: ignore[return-value]


def check_plan(tile: Sequence[int], halo: Sequence[int], chunks: Sequence[int], block_size: int,
               block_depth: int | None) -> tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]:
    """The three shapes as tuples, or an :class:`InputError` that says which setting breaks which alignment."""
    t, h, c = _three("tile", tile), _three("halo", halo), _three("chunks", chunks)
    if min(t) < 1 or min(c) < 1:
        raise InputError(f"executor.tile {list(t)} and executor.chunks {list(c)} must be positive")
    for axis, (tn, cn) in enumerate(zip(t, c)):
        if tn % cn:
            raise InputError(f"executor.tile {list(t)} must be a multiple of executor.chunks {list(c)} (axis "
                             f"{'zyx'[axis]}): a tile writes whole chunks, so no two workers write one chunk")
    for axis in (1, 2):
        if t[axis] % block_size or h[axis] % block_size:
            raise InputError(f"executor.tile {list(t)} and executor.halo {list(h)} must be multiples of "
                             f"loop.block_size={block_size} in y and x, so that tiles see the loop's own blocks")
    if block_depth and (t[0] % block_depth or h[0] % block_depth):
        raise InputError(f"executor.tile and executor.halo must be multiples of loop.block_depth={block_depth} in z")
    return t, h, c


def plan_tiles(shape: Sequence[int], tile: Sequence[int], halo: Sequence[int],
               align: Sequence[int] = (1, 1, 1)) -> list[Tile]:
    """Tiles in z, y, x order (row-major, ids from 0); edge tiles are smaller.

    Every region is the tile grown by ``halo`` on each side, clipped to the volume; a region cut short by the
    volume's border is pushed inward instead (its start kept on a multiple of ``align``, the loop's block),
    so a task at the border reads as much as one inside: a worker's memory then depends on the plan only,
    not on where its tile lies or how large the volume is."""
    d, hgt, w = (int(s) for s in shape)
    tz, ty, tx = (int(v) for v in tile)
    tiles: list[Tile] = []
    for z0 in range(0, d, tz):
        for y0 in range(0, hgt, ty):
            for x0 in range(0, w, tx):
                interior = (slice(z0, min(d, z0 + tz)), slice(y0, min(hgt, y0 + ty)), slice(x0, min(w, x0 + tx)))
                region = tuple(_region(s, int(h), int(n), int(a), int(t))
                               for s, h, n, a, t in zip(interior, halo, shape, align, tile))
                tiles.append(Tile(len(tiles), interior, region))  # type: ignore[arg-type]
    return tiles


def _region(inner: slice, halo: int, n: int, align: int, tile: int) -> slice:
    """One axis of a region: ``tile + 2 * halo`` long where the volume allows, around ``inner``."""
    want = min(n, tile + 2 * halo)
    lo, hi = inner.start - halo, inner.stop + halo
    if lo < 0:
        lo, hi = 0, min(n, want)
    if hi > n:
        lo = max(0, n - want) // max(align, 1) * max(align, 1)
        hi = n
    return slice(min(lo, inner.start), max(hi, inner.stop))


#: a chunk with no foreground: a box that meets no region
NO_BOX = (-1, -1, -1, -1, -1, -1)


def chunk_box(block: np.ndarray, block_info: dict | None = None) -> np.ndarray:
    """(1, 1, 1, 6) int64: the foreground's box in one chunk of the mask, volume coordinates, half-open
    (z0, z1, y0, y1, x0, x1), or :data:`NO_BOX`; for ``dask.array.map_blocks`` over the mask (``block_info`` gives
    the chunk's place)."""
    out = np.array(NO_BOX, np.int64).reshape(1, 1, 1, 6)
    if not np.any(block):
        return out
    origin = [lo for lo, _ in block_info[0]["array-location"]] if block_info else [0, 0, 0]
    for axis in range(3):
        hit = np.flatnonzero(np.any(block, axis=tuple(a for a in range(3) if a != axis)))
        out[0, 0, 0, 2 * axis: 2 * axis + 2] = origin[axis] + hit[0], origin[axis] + hit[-1] + 1
    return out


def chunk_boxes(mask) -> object:  # type: ignore[no-untyped-def]
    """A lazy (nz, ny, nx, 6) Dask array of :func:`chunk_box` over a 3D Dask mask, one entry per chunk."""
    return mask.map_blocks(chunk_box, chunks=(*((1,) * n for n in mask.numblocks), (6,)), new_axis=3,
                           dtype=np.int64, meta=np.empty((0, 0, 0, 0), np.int64))


@dataclass(frozen=True)
class Occupancy:
    """Where the mask holds foreground, chunk by chunk: ``boxes`` (nz, ny, nx, 6) from :func:`chunk_boxes` and
    ``edges``, each axis's chunk boundaries (0, ..., size)."""

    boxes: np.ndarray
    edges: tuple[np.ndarray, np.ndarray, np.ndarray]

    @classmethod
    def of(cls, boxes: np.ndarray, chunks: Sequence[Sequence[int]]) -> Occupancy:
        """From the computed boxes and the mask's Dask chunks (sizes per axis)."""
        edges = tuple(np.concatenate([[0], np.cumsum(np.asarray(c, np.int64))]) for c in chunks)
        return cls(np.asarray(boxes, np.int64), edges)  # type: ignore[arg-type]

    def touches(self, region: Slices) -> bool:
        """Whether any foreground box meets ``region`` (volume coordinates): only the chunks it overlaps are
        looked at."""
        picks = []
        for axis, sl in enumerate(region):
            e = self.edges[axis]
            picks.append(slice(max(int(np.searchsorted(e, sl.start, "right")) - 1, 0),
                               int(np.searchsorted(e, sl.stop, "left"))))
        b = self.boxes[tuple(picks)].reshape(-1, 6)
        b = b[b[:, 0] >= 0]
        hit = np.ones(len(b), bool)
        for axis, sl in enumerate(region):
            hit &= (b[:, 2 * axis] < sl.stop) & (b[:, 2 * axis + 1] > sl.start)
        return bool(hit.any())


def occupied(tiles: Sequence[Tile], occupancy: Occupancy) -> tuple[list[Tile], list[Tile]]:
    """(tiles whose region meets foreground, tiles whose region holds none: never scheduled, read or refined)."""
    keep, skip = [], []
    for t in tiles:
        (keep if occupancy.touches(t.region) else skip).append(t)
    return keep, skip
