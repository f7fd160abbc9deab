"""The one value that carries a 3D stack through the project: array + voxel spacing + source.

Arrays are ZYX. Spacing is (z, y, x) in micrometres and travels with the data, because tracing and
the metrics work in physical units on anisotropic stacks (DIADEM: 1.0 x 0.33 x 0.33 um).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.errors import InputError

Spacing = tuple[float, float, float]
DEFAULT_SPACING: Spacing = (1.0, 1.0, 1.0)


@dataclass
class Volume:
    """A 3D stack (ZYX) with its voxel spacing (z, y, x) in um.

    ``array`` may be a numpy array or a lazy array (zarr) with ``shape``/``dtype`` and slicing;
    call :meth:`load` to get numpy.
    """

    array: Any
    spacing: Spacing = DEFAULT_SPACING
    source: str | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.array.shape) != 3:
            raise InputError(f"expected a 3D (Z, Y, X) stack, got shape {tuple(self.array.shape)}",
                             self.source)
        self.spacing = check_spacing(self.spacing, self.source)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.array.shape)  # type: ignore[return-value]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    def load(self) -> np.ndarray:
        """The data as an in-memory numpy array (reads a lazy array)."""
        return np.asarray(self.array[...]) if not isinstance(self.array, np.ndarray) else self.array

    def normalized(self, percentile: tuple[float, float] = (0.0, 100.0)) -> np.ndarray:
        """float32 in [0, 1] (min-max, or between two percentiles, clipped)."""
        data = self.load().astype(np.float32)
        check_finite(data, self.source)
        lo, hi = np.percentile(data, percentile) if percentile != (0.0, 100.0) else (data.min(), data.max())
        if hi <= lo:
            return np.zeros_like(data)
        return np.clip((data - lo) / (hi - lo), 0.0, 1.0)


def check_spacing(spacing: Any, source: str | None = None) -> Spacing:
    """Three finite positive numbers, or a clear error."""
    try:
        values = tuple(float(s) for s in spacing)
    except (TypeError, ValueError) as exc:
        raise InputError(f"voxel spacing must be three numbers (z, y, x), got {spacing!r}", source) from exc
    if len(values) != 3 or not all(np.isfinite(v) and v > 0 for v in values):
        raise InputError(f"voxel spacing must be three positive numbers (z, y, x) in um, got {spacing!r}",
                         source)
    return values  # type: ignore[return-value]


def check_finite(array: np.ndarray, source: str | None = None) -> None:
    """Raise if the stack holds NaN or inf (they poison normalisation and every network)."""
    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).sum())
        raise InputError(f"stack contains {bad} NaN/inf voxels; clean or clip it first", source)


def select_3d(array: np.ndarray, axes: str, source: str | None, channel: int = 0) -> np.ndarray:
    """Reduce an array with named axes (e.g. 'TZCYX') to ZYX, picking ``channel`` if there are several.

    A 2D image is refused: every stage here works on 3D stacks.
    """
    axes = axes.upper()
    if array.ndim != len(axes):
        raise InputError(f"axes {axes!r} do not match array of shape {array.shape}", source)
    if "Z" not in axes or array.shape[axes.index("Z")] == 1:
        raise InputError(f"expected a 3D stack but the image is 2D (shape {array.shape}, axes {axes})",
                         source)
    index: list[Any] = []
    kept = ""
    for ax, size in zip(axes, array.shape):
        if ax in "ZYX":
            index.append(slice(None))
            kept += ax
        elif ax == "C" or ax == "S":
            if size > 1:
                if not 0 <= channel < size:
                    raise InputError(f"channel {channel} requested but the stack has {size} channels", source)
                warnings.warn(f"{source}: multichannel stack ({size} channels); using channel {channel} "
                              "(choose another with --channel / channel=)", stacklevel=3)
            index.append(channel if size > 1 else 0)
        else:  # T or any other axis: first entry, warn if it hides data
            if size > 1:
                warnings.warn(f"{source}: axis {ax} has {size} entries; using the first", stacklevel=3)
            index.append(0)
    out = array[tuple(index)]
    order = [kept.index(a) for a in "ZYX"]
    return np.transpose(out, order)


def read_volume(path: str | Path, channel: int = 0, lazy: bool = False) -> Volume:
    """Read a 3D stack from TIFF, Vaa3D .v3draw/.v3dpbd, (OME-)Zarr or .npy.

    Raises :class:`InputError` naming the file for a missing, corrupt, truncated, 2D or unsupported file.
    """
    from neurorefiner.io import formats

    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    reader = formats.reader_for(p)
    try:
        return reader(p, channel=channel, lazy=lazy)
    except InputError:
        raise
    except Exception as exc:  # a library error deep inside: say which file and what went wrong
        raise InputError(f"cannot read stack ({type(exc).__name__}: {exc})", p) from exc


def write_volume(path: str | Path, volume: Volume | np.ndarray, spacing: Spacing | None = None) -> Path:
    """Write a stack atomically; format by suffix (.tif/.tiff, .v3draw, .zarr, .ome.zarr, .npy).

    Boolean masks are written as uint8 0/255 so they show in Fiji, Vaa3D and napari as they are.
    """
    from neurorefiner.io import formats

    if isinstance(volume, np.ndarray):
        volume = Volume(volume, spacing or DEFAULT_SPACING, source=str(path))
    elif spacing is not None:
        volume = Volume(volume.array, spacing, volume.source, volume.metadata)
    data = volume.load()
    if data.dtype == bool:
        data = data.astype(np.uint8) * 255
    writer = formats.writer_for(Path(path))
    return writer(Path(path), data, volume.spacing)


def read_mask(path: str | Path, channel: int = 0) -> Volume:
    """Read a binary mask (values {0, v}); refuse label images and grey images with a clear error."""
    vol = read_volume(path, channel=channel)
    data = vol.load()
    values = np.unique(data) if data.size <= 64**3 * 8 else np.unique(data[:: 2, :: 2, :: 2])
    if len(values) > 2 or (len(values) == 2 and values[0] != 0):
        shown = ", ".join(str(v) for v in values[:5]) + (" ..." if len(values) > 5 else "")
        raise InputError(f"mask is not binary: found {len(values)} distinct values ({shown}); "
                         "pass a 0/1 or 0/255 mask", path)
    return Volume(data > 0, vol.spacing, vol.source, vol.metadata)


def check_same_shape(image: Volume, mask: Volume) -> None:
    """Image and mask must cover the same voxels."""
    if image.shape != mask.shape:
        raise InputError(f"mask shape {mask.shape} differs from image shape {image.shape} "
                         f"({image.source})", mask.source)
