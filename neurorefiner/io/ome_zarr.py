"""Chunked volumes for the whole-volume engine: OME-Zarr in (read lazily, region by region) and out (level 0
written tile by tile, then a pyramid and the NGFF metadata).

Why a module of its own beside :mod:`.formats`: the in-memory readers return a whole array, which is what a
TIFF that fits wants; a whole brain does not fit, so here a volume is a :class:`ZarrSource` (a path and an
array inside it, picklable, opened again on whichever Dask worker reads a region) and nothing is read until a
region is asked for.

What is written is what napari (napari-ome-zarr) and Fiji (N5/Zarr readers, "HDF5/N5/Zarr/OME-NGFF") open:
NGFF 0.4 on the Zarr v2 format (Fiji's readers do not read Zarr v3), ``/``-separated chunk keys, axes
``z, y, x`` in micrometres, a ``scale`` transform per level. The mask is uint8 0/255 (as the TIFF outputs),
and each pyramid level is the max over 2 x 2 in y, x (and z while z is the longest axis), so a one-voxel
neurite stays visible when zoomed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.volume import Spacing, check_spacing, unit_to_um

Slices = tuple[slice, slice, slice]
OME_SUFFIXES = (".zarr", ".ome.zarr")
NGFF_VERSION = "0.4"


def is_zarr_path(path: str | Path) -> bool:
    """Whether ``path`` names a Zarr store (by its suffix, as :mod:`.formats` chooses readers)."""
    return str(path).lower().rstrip("/").endswith(OME_SUFFIXES)


@dataclass(frozen=True)
class ZarrSource:
    """A ZYX view of one array of an OME-Zarr (or plain Zarr) store, read region by region.

    ``lead`` indexes the axes before z, y, x (time, channel) and picks one entry of each. Picklable: a Dask
    task carries the path, not the data, and opens the array where it runs."""

    path: str
    array_path: str
    shape: tuple[int, int, int]
    dtype: str
    lead: tuple[int, ...] = ()
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)   # z, y, x in um
    calibration: str | None = None   # where the spacing came from; None: the store gives no voxel size

    def open(self) -> Any:
        import zarr

        root = zarr.open(self.path, mode="r")
        return root if not self.array_path else root[self.array_path]

    def read(self, region: Slices) -> np.ndarray:
        """The region (ZYX slices, volume coordinates) as numpy."""
        return np.asarray(self.open()[(*self.lead, *region)])

    def __getitem__(self, index: Any) -> np.ndarray:
        if index is Ellipsis:
            index = (slice(None),) * 3
        return np.asarray(self.open()[(*self.lead, *index)])

    @property
    def ndim(self) -> int:
        return 3

    def as_dask(self) -> Any:
        """The whole volume as a lazy Dask array (one Dask chunk per Zarr chunk)."""
        import dask.array as da

        arr = da.from_zarr(self.open())
        return arr[self.lead] if self.lead else arr


def level0(node: Any, path: str | Path) -> tuple[Any, str, list[str], list[float], str | None]:
    """(array, its path in the store, axis names lower-case, scale per axis in um for space axes, where the scale
    came from or None) of an opened Zarr node: an OME-Zarr group's first multiscales level with its ``scale``
    transform and axis units (NGFF; no unit is read as um, and the source says so, except a scale of 1 with no
    unit, which is a voxel grid without a size), or a plain array with a
    ``spacing`` attribute. A node with neither gives scale 1 and source None (no voxel size in the store)."""
    import zarr

    if isinstance(node, zarr.Group):
        attrs = dict(node.attrs)
        ms = attrs.get("multiscales") or attrs.get("ome", {}).get("multiscales")
        if not ms:
            raise InputError("a Zarr group without OME-NGFF 'multiscales' metadata (not an OME-Zarr image; point at "
                             "the array instead)", path)
        ds0 = ms[0]["datasets"][0]
        try:
            arr = node[ds0["path"]]
        except KeyError:
            raise InputError(f"its multiscales name level {ds0['path']!r}, which the store does not hold",
                             path) from None
        axes = ms[0].get("axes") or ["z", "y", "x"][-arr.ndim:]
        names = [str(a["name"] if isinstance(a, dict) else a).lower() for a in axes]
        scales = [tr["scale"] for tr in ds0.get("coordinateTransformations", []) if tr.get("type") == "scale"]
        if not scales:
            return arr, str(ds0["path"]), names, [1.0] * arr.ndim, None
        scale, guessed = [float(s) for s in scales[0]], False
        for i, a in enumerate(axes):
            unit = a.get("unit") if isinstance(a, dict) else None
            if names[i] in ("z", "y", "x"):
                factor = unit_to_um(unit, str(path))
                guessed |= factor is None
                scale[i] *= 1.0 if factor is None else factor
        space = [scale[i] for i, n in enumerate(names) if n in ("z", "y", "x")]
        if guessed and all(v == 1.0 for v in space):  # a scale of 1 with no unit: one per voxel, no voxel size
            return arr, str(ds0["path"]), names, scale, None
        return arr, str(ds0["path"]), names, scale, "OME-Zarr scale" + (" (no unit; read as um)" if guessed else "")
    names = ["z", "y", "x"] if node.ndim == 3 else [f"a{i}" for i in range(node.ndim - 3)] + ["z", "y", "x"]
    spacing = node.attrs.get("spacing")
    if spacing is None:
        return node, "", names, [1.0] * node.ndim, None
    return node, "", names, [1.0] * (node.ndim - 3) + [float(s) for s in spacing], "Zarr attribute 'spacing'"


def open_ome_zarr(path: str | Path, channel: int = 0) -> tuple[ZarrSource, Spacing]:
    """Level 0 of an OME-Zarr image (or a plain 3D Zarr array) and its spacing (z, y, x) in um (1, 1, 1 where
    the store gives none; :attr:`ZarrSource.calibration` is then None).

    Nothing is read but metadata. Raises :class:`InputError` naming ``path`` when it is missing, not a Zarr
    store, a group without NGFF ``multiscales``, or not 3D in space."""
    import zarr

    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    try:
        node = zarr.open(str(p), mode="r")
    except Exception as exc:  # noqa: BLE001 - whatever the store layer says, the user needs the file and the gist
        raise InputError(f"not a Zarr store (OME-Zarr expected: a folder with .zattrs/zarr.json): "
                         f"{type(exc).__name__}: {exc}", p) from None
    arr, array_path, names, scale, calibration = level0(node, p)
    names = [n.lower() for n in names]
    if arr.ndim < 3 or names[-3:] != ["z", "y", "x"]:
        raise InputError(f"expected spatial axes z, y, x last, got axes {names} of shape {tuple(arr.shape)}", p)
    lead: list[int] = []
    for name, size in zip(names[:-3], arr.shape[:-3]):
        pick = channel if name.startswith("c") else 0
        if not 0 <= pick < size:
            raise InputError(f"channel {channel} requested but the image has {size} channels", p)
        lead.append(pick)
    spacing = check_spacing(scale[-3:], str(p))
    shape = tuple(int(s) for s in arr.shape[-3:])
    return ZarrSource(str(p.resolve()), array_path, shape, str(arr.dtype), tuple(lead),  # type: ignore[arg-type]
                      spacing, calibration), spacing


def _ngff_axes() -> list[dict]:
    return [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]


def create_mask_store(path: str | Path, shape: Sequence[int], chunks: Sequence[int]) -> str:
    """An empty OME-Zarr group with level ``0`` (uint8, fill 0, ``chunks``); returns the level's path.

    Chunks never written stay absent and read as 0, so a sparse brain mask costs the storage of its neurites.
    The multiscales metadata is added by :func:`finish_pyramid` once level 0 is complete: until then the store
    is no OME-Zarr image, and nobody mistakes a half-written one for a result."""
    import zarr

    root = zarr.open_group(str(path), mode="a", zarr_format=2)
    if "0" not in root:
        root.create_array("0", shape=tuple(int(s) for s in shape), dtype="uint8",
                          chunks=tuple(int(c) for c in chunks), fill_value=0,
                          chunk_key_encoding={"name": "v2", "separator": "/"})
    return str(Path(path) / "0")


def write_region(array_path: str, region: Slices, mask: np.ndarray) -> None:
    """Write a bool mask into ``region`` of a level-0 array as 0/255 (the caller owns those chunks)."""
    import zarr

    arr = zarr.open_array(array_path, mode="r+")
    arr[region] = np.asarray(mask, bool).astype(np.uint8) * 255


def pyramid_factors(shape: Sequence[int], spacing: Spacing, min_side: int = 256, max_levels: int = 8
                    ) -> list[tuple[int, int, int]]:
    """Per level (after 0) the downsampling of that level from the one before: 2 in y and x, and 2 in z only
    while z is not the coarsest axis in um (an anisotropic stack keeps its z until x and y catch up)."""
    size = [int(s) for s in shape]
    sp = [float(s) for s in spacing]
    out: list[tuple[int, int, int]] = []
    while len(out) < max_levels and max(size[1], size[2]) > min_side:
        fz = 2 if size[0] > 1 and sp[0] <= min(sp[1], sp[2]) else 1
        f = (fz, 2, 2)
        out.append(f)
        size = [-(-s // k) for s, k in zip(size, f)]
        sp = [s * k for s, k in zip(sp, f)]
    return out


def pool_max(blocks: np.ndarray, axis: tuple[int, ...] | None = None) -> np.ndarray:
    """``np.max(blocks, axis=axis)`` for ``dask.array.coarsen`` (which reshapes each axis into (n / k, k) pairs),
    the same values, quicker: an all-zero chunk (empty space: an absent chunk reads as 0) gives zeros without a
    pass over its pooling windows, and the others are pooled by elementwise maxima of the window's offsets rather
    than by a reduction over short strided axes (about 8x faster on a 64 x 256 x 256 uint8 chunk)."""
    import functools

    if axis is None:   # what dask asks for the result's type
        return np.max(blocks)
    if not blocks.any():
        return np.zeros(tuple(n for i, n in enumerate(blocks.shape) if i not in axis), blocks.dtype)
    for a in sorted(axis, reverse=True):
        blocks = functools.reduce(np.maximum, (blocks.take(i, axis=a) for i in range(blocks.shape[a])))
    return blocks


def finish_pyramid(path: str | Path, spacing: Spacing, min_side: int = 256) -> int:
    """Build the coarser levels from level 0 (chunked max pooling with Dask, on whatever scheduler is active)
    and write the NGFF multiscales metadata; returns the number of levels."""
    import dask.array as da
    import zarr

    root = zarr.open_group(str(path), mode="r+", zarr_format=2)
    level0 = root["0"]
    factors = pyramid_factors(level0.shape, spacing, min_side)
    datasets = [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": list(map(float, spacing))}]}]
    prev = da.from_zarr(level0)
    scale = [float(s) for s in spacing]
    for level, f in enumerate(factors, start=1):
        pad = [(0, (-n) % k) for n, k in zip(prev.shape, f)]
        padded = da.pad(prev, pad) if any(p for _, p in pad) else prev
        pooled = da.coarsen(pool_max, padded, {i: k for i, k in enumerate(f)})
        chunks = tuple(min(int(c), int(n)) for c, n in zip(level0.chunks, pooled.shape))
        if str(level) in root:
            del root[str(level)]
        target = root.create_array(str(level), shape=pooled.shape, dtype="uint8", chunks=chunks, fill_value=0,
                                   chunk_key_encoding={"name": "v2", "separator": "/"})
        da.store(pooled.rechunk(chunks), target, lock=False)
        prev = da.from_zarr(target)
        scale = [s * k for s, k in zip(scale, f)]
        datasets.append({"path": str(level), "coordinateTransformations": [{"type": "scale", "scale": list(scale)}]})
    _write_metadata(root, datasets, "refined_mask", type="max",
                    metadata={"description": "2x max pooling per level (a mask stays visible)"})
    return len(datasets)


def _write_metadata(root: Any, datasets: list[dict], name: str, **extra: Any) -> None:
    """The NGFF 0.4 ``multiscales`` block, written and checked by ome-zarr's own writer (the library napari's
    reader is built on), so what we write is what the readers expect."""
    from ome_zarr.format import FormatV04
    from ome_zarr.writer import write_multiscales_metadata

    write_multiscales_metadata(root, datasets, fmt=FormatV04(), axes=_ngff_axes(), name=name, **extra)


def write_ome_zarr_volume(path: str | Path, data: Any, spacing: Spacing, chunks: Sequence[int] = (64, 256, 256)
                          ) -> Path:
    """A one-level OME-Zarr image (NGFF 0.4, Zarr v2) from a numpy or Dask array, chunk by chunk (a Dask array
    larger than memory is never held whole). For inputs (tests, the benchmark, a lab converting a TIFF)."""
    import dask.array as da
    import zarr

    arr = data if isinstance(data, da.Array) else da.from_array(np.asarray(data))
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    chunks = tuple(min(int(c), int(n)) for c, n in zip(chunks, arr.shape))
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    target = root.create_array("0", shape=arr.shape, dtype=arr.dtype, chunks=chunks, fill_value=0,
                               chunk_key_encoding={"name": "v2", "separator": "/"})
    da.store(arr.rechunk(chunks), target, lock=False)
    _write_metadata(root, [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [float(s) for s in spacing]}]}], Path(path).name)
    return Path(path)
