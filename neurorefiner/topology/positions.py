"""Position words on a 3 x 3 x 3 grid of a block, and the voxels each names.

The instructions that the agents write and TopoRefineNet reads say *where* in a block to edit with a
word triple ``vertical-horizontal-depth``, e.g. ``top-left-rear``. This module is the one place that
ties those words to array axes, so the agents, the defect generators and the metrics agree:

============  ======================  ==================  ========================================
axis          words (small -> large)  array axis (ZYX)    meaning
============  ======================  ==================  ========================================
vertical      top, center, bottom     Y (rows, axis 1)    top = small y, the first rows (as an
                                                          image is shown: row 0 at the top)
horizontal    left, center, right     X (columns, ax. 2)  left = small x, the first columns
depth         front, center, rear     Z (slices, axis 0)  front = small z, the first slices (the
                                                          paper's YZ view puts Front on the left,
                                                          i.e. at z = 0)
============  ======================  ==================  ========================================

Each axis of a block of shape (D, H, W) is cut into thirds (``round(i * n / 3)`` boundaries), so the
27 cells tile the block exactly. The canonical spelling is ``vertical-horizontal-depth`` in lower case
(``center-right-rear``); :func:`parse_position` also reads other orders, spaces, British spelling and
the synonyms a language model tends to use (upper/lower, middle, anterior/posterior, back ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

AXES = ("vertical", "horizontal", "depth")
WORDS: dict[str, tuple[str, str, str]] = {
    "vertical": ("top", "center", "bottom"),
    "horizontal": ("left", "center", "right"),
    "depth": ("front", "center", "rear"),
}
# array axis (0 = z, 1 = y, 2 = x) that each position axis runs along
ARRAY_AXIS = {"vertical": 1, "horizontal": 2, "depth": 0}

# synonyms -> (axis, index); "center" is shared by the three axes and handled apart
_SYNONYMS: dict[str, tuple[str, int]] = {
    "top": ("vertical", 0), "upper": ("vertical", 0),
    "bottom": ("vertical", 2), "lower": ("vertical", 2),
    "left": ("horizontal", 0), "right": ("horizontal", 2),
    "front": ("depth", 0), "anterior": ("depth", 0),
    "rear": ("depth", 2), "back": ("depth", 2), "posterior": ("depth", 2),
}
CENTER_WORDS = frozenset({"center", "centre", "middle", "central", "mid"})
POSITION_WORDS = frozenset(_SYNONYMS) | CENTER_WORDS


class PositionError(ValueError):
    """A position that is not a word triple of the grid."""


@dataclass(frozen=True)
class Position:
    """A cell of the 3 x 3 x 3 grid, as its three words; synonyms are stored in canonical spelling
    (``Position("upper", "left", "posterior") == Position("top", "left", "rear")``)."""

    vertical: str = "center"
    horizontal: str = "center"
    depth: str = "center"

    def __post_init__(self) -> None:
        for axis in AXES:
            word = getattr(self, axis)
            found = position_word(word) if isinstance(word, str) else None
            if found is None or found[0] not in (axis, "center"):
                raise PositionError(f"{word!r} is not a {axis} word ({' | '.join(WORDS[axis])})")
            object.__setattr__(self, axis, WORDS[axis][found[1]])

    def __iter__(self) -> Iterator[str]:
        return iter((self.vertical, self.horizontal, self.depth))

    @classmethod
    def from_cell(cls, cell: Sequence[int]) -> Position:
        """From grid indices in array order (iz, iy, ix), each 0, 1 or 2."""
        iz, iy, ix = (int(i) for i in cell)
        if not all(0 <= i <= 2 for i in (iz, iy, ix)):
            raise PositionError(f"grid cell indices must be 0, 1 or 2, got {tuple(cell)}")
        return cls(WORDS["vertical"][iy], WORDS["horizontal"][ix], WORDS["depth"][iz])

    @property
    def cell(self) -> tuple[int, int, int]:
        """Grid indices in array order (iz, iy, ix)."""
        return (WORDS["depth"].index(self.depth), WORDS["vertical"].index(self.vertical),
                WORDS["horizontal"].index(self.horizontal))

    def format(self) -> str:
        return f"{self.vertical}-{self.horizontal}-{self.depth}"

    def __str__(self) -> str:
        return self.format()

    def flipped(self, array_axes: Iterable[int]) -> Position:
        """The same cell after the block is mirrored along the given array axes (0 = z, 1 = y, 2 = x)."""
        cell = list(self.cell)
        for a in array_axes:
            cell[a] = 2 - cell[a]
        return Position.from_cell(cell)

    def slices(self, shape: Sequence[int]) -> tuple[slice, slice, slice]:
        return cell_slices(self.cell, shape)

    def region(self, shape: Sequence[int]) -> np.ndarray:
        return region_mask(shape, [self])


def _check_shape(shape: Sequence[int]) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"block shape must be three positive sizes (D, H, W), got {shape}")
    return shape  # type: ignore[return-value]


def _bounds(n: int) -> list[int]:
    """The 4 boundaries that cut an axis of length n into thirds (exact tiling, no gaps)."""
    return [int(round(i * n / 3.0)) for i in range(4)]


def cell_slices(cell: Sequence[int], shape: Sequence[int]) -> tuple[slice, slice, slice]:
    """Slices (z, y, x) of grid cell (iz, iy, ix) in a block of ``shape`` (D, H, W)."""
    shape = _check_shape(shape)
    out = []
    for i, n in zip(cell, shape, strict=True):
        b = _bounds(n)
        out.append(slice(b[int(i)], b[int(i) + 1]))
    return tuple(out)  # type: ignore[return-value]


def hull_slices(positions: Sequence[Position], shape: Sequence[int]) -> tuple[slice, slice, slice]:
    """Slices of the box spanning all the given cells (e.g. both ends of a connection)."""
    shape = _check_shape(shape)
    cells = np.array([p.cell for p in positions])
    out = []
    for a, n in enumerate(shape):
        b = _bounds(n)
        out.append(slice(b[cells[:, a].min()], b[cells[:, a].max() + 1]))
    return tuple(out)  # type: ignore[return-value]


def region_mask(shape: Sequence[int], positions: Sequence[Position], hull: bool = True) -> np.ndarray:
    """Boolean (D, H, W) mask of the named cells: their spanning box (``hull``) or just the cells."""
    shape = _check_shape(shape)
    mask = np.zeros(shape, dtype=bool)
    if not positions:
        return mask
    if hull:
        mask[hull_slices(positions, shape)] = True
    else:
        for p in positions:
            mask[p.slices(shape)] = True
    return mask


def cell_index(coords: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Grid cell (iz, iy, ix) of each voxel coordinate; coords is (N, 3) in ZYX order."""
    shape = _check_shape(shape)
    coords = np.asarray(coords).reshape(-1, 3)
    out = np.empty(coords.shape, dtype=np.int64)
    for a, n in enumerate(shape):
        b = np.asarray(_bounds(n)[1:3])
        out[:, a] = np.searchsorted(b, np.clip(np.floor(coords[:, a]), 0, n - 1), side="right")
    return out


def locate(points_or_mask: np.ndarray, block_shape: Sequence[int]) -> Position:
    """Where a defect is: the grid cell that holds most of its voxels.

    ``points_or_mask`` is a boolean (D, H, W) mask or (N, 3) ZYX voxel coordinates. The cell holding
    the most voxels is chosen (not the cell of the centroid, which can fall where nothing is, e.g.
    for a curved fragment); ties go to the cell nearest the centroid.
    """
    shape = _check_shape(block_shape)
    arr = np.asarray(points_or_mask)
    if arr.dtype == bool and arr.ndim == 3:
        if arr.shape != shape:
            raise ValueError(f"mask shape {arr.shape} differs from block shape {shape}")
        coords = np.argwhere(arr)
    else:
        coords = arr.reshape(-1, 3).astype(np.float64)
    if len(coords) == 0:
        raise ValueError("cannot locate an empty set of voxels")
    cells = cell_index(coords, shape)
    codes = cells[:, 0] * 9 + cells[:, 1] * 3 + cells[:, 2]
    counts = np.bincount(codes, minlength=27)
    best = np.flatnonzero(counts == counts.max())
    if len(best) > 1:
        centroid_cell = cell_index(coords.mean(axis=0, keepdims=True), shape)[0]
        cand = np.stack([best // 9, (best // 3) % 3, best % 3], axis=1)
        best = best[[int(np.argmin(np.abs(cand - centroid_cell).sum(axis=1)))]]
    code = int(best[0])
    return Position.from_cell((code // 9, (code // 3) % 3, code % 3))


def position_word(word: str) -> tuple[str, int] | None:
    """(axis, index) of a non-center position word, ("center", 1) for a center word, None otherwise."""
    w = word.lower()
    if w in CENTER_WORDS:
        return ("center", 1)
    return _SYNONYMS.get(w)


def position_from_words(words: Sequence[str]) -> Position:
    """A position from 1-3 words in any order; axes not named are ``center``.

    Each non-center word fixes its own axis; center words fill the axes left over. Two words on the
    same axis, more center words than free axes, or an unknown word raise :class:`PositionError`.
    """
    if not 1 <= len(words) <= 3:
        raise PositionError(f"a position has 1 to 3 words, got {list(words)}")
    idx: dict[str, int] = {}
    centers = 0
    for w in words:
        found = position_word(w)
        if found is None:
            raise PositionError(f"unknown position word {w!r}")
        axis, i = found
        if axis == "center":
            centers += 1
            continue
        if axis in idx:
            raise PositionError(f"two {axis} words in one position: {list(words)}")
        idx[axis] = i
    if centers > 3 - len(idx):
        raise PositionError(f"too many center words in {list(words)}")
    return Position(*(WORDS[a][idx.get(a, 1)] for a in AXES))


def parse_position(text: str | Position) -> Position:
    """Read a position such as ``"Top-Left-Rear"``, ``"rear top left"`` or ``"right center rear"``."""
    if isinstance(text, Position):
        return text
    if not isinstance(text, str):
        raise PositionError(f"a position is a string like 'top-left-rear', got {text!r}")
    words = [w for w in re.split(r"[^a-z]+", text.lower()) if w and w not in {"the", "of", "and"}]
    if not words:
        raise PositionError(f"empty position {text!r}")
    return position_from_words(words)


def all_positions() -> list[Position]:
    """The 27 cells in array order (z slowest)."""
    return [Position.from_cell((z, y, x)) for z in range(3) for y in range(3) for x in range(3)]
