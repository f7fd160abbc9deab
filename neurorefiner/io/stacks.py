"""Reading and writing stacks by file name: the one front door that picks a format (:mod:`.formats`) and
returns a :class:`~neurorefiner.io.volume.Volume`. Kept apart from ``volume`` so that the formats can use
the Volume type without an import circle."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io import formats
from neurorefiner.io.volume import DEFAULT_SPACING, Spacing, Volume


def read_volume(path: str | Path, channel: int = 0, lazy: bool = False) -> Volume:
    """Read a 3D stack from TIFF, Vaa3D .v3draw/.v3dpbd, (OME-)Zarr or .npy.

    Raises :class:`InputError` naming the file for a missing, corrupt, truncated, 2D or unsupported file.
    """
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
    """Write a stack atomically; format by suffix (.tif/.tiff, .v3draw, .zarr, .ome.zarr, .npy). An array is
    written at ``spacing`` (default 1, 1, 1 um); a :class:`Volume` at its own spacing (``spacing`` overrides it),
    or without a voxel size when it came from a file that had none (``calibration`` None).

    Boolean masks are written as uint8 0/255 so they show in Fiji, Vaa3D and napari as they are.
    """
    if isinstance(volume, np.ndarray):
        volume = Volume(volume, spacing or DEFAULT_SPACING, source=str(path))
    elif spacing is not None:
        volume = Volume(volume.array, spacing, volume.source, volume.metadata)
    data = volume.load()
    if data.dtype == bool:
        data = data.astype(np.uint8) * 255
    writer = formats.writer_for(Path(path))
    # a volume read from a file without a voxel size is written without one: never turned into "1 um" on the way
    return writer(Path(path), data, volume.spacing if volume.calibration else None)


def read_mask(path: str | Path, channel: int = 0) -> Volume:
    """Read a binary mask (values {0, v}); refuse label images and grey images with a clear error."""
    vol = read_volume(path, channel=channel)
    data = vol.load()
    values = np.unique(data) if data.size <= 64**3 * 8 else np.unique(data[:: 2, :: 2, :: 2])
    if len(values) > 2 or (len(values) == 2 and values[0] != 0):
        shown = ", ".join(str(v) for v in values[:5]) + (" ..." if len(values) > 5 else "")
        raise InputError(f"mask is not binary: found {len(values)} distinct values ({shown}); "
                         "pass a 0/1 or 0/255 mask", path)
    return Volume(data > 0, vol.spacing, vol.source, vol.metadata, vol.calibration)


def check_same_shape(image: Volume, mask: Volume) -> None:
    """Image and mask must cover the same voxels."""
    if image.shape != mask.shape:
        raise InputError(f"mask shape {mask.shape} differs from image shape {image.shape} "
                         f"({image.source})", mask.source)
