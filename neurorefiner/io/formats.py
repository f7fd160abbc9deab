"""Readers and writers per file format, chosen by suffix. Each returns/accepts ZYX + spacing (z, y, x)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io import v3d
from neurorefiner.io.atomic import atomic_path
from neurorefiner.io.volume import DEFAULT_SPACING, Spacing, Volume, select_3d

Reader = Callable[..., Volume]
Writer = Callable[[Path, np.ndarray, Spacing], Path]


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in (".ome.zarr", ".ome.tiff", ".ome.tif"):
        if name.endswith(s):
            return s
    return path.suffix.lower()


# ----------------------------------------------------------------------------------------- TIFF
def _tiff_spacing(tif) -> Spacing:
    """Spacing from OME metadata, else ImageJ metadata ('spacing' for z, resolution tags for x/y)."""
    z, y, x = DEFAULT_SPACING
    if tif.is_ome and tif.ome_metadata:
        import xml.etree.ElementTree as ET

        root = ET.fromstring(tif.ome_metadata)
        for el in root.iter():
            if el.tag.endswith("Pixels"):
                x = float(el.get("PhysicalSizeX", x))
                y = float(el.get("PhysicalSizeY", y))
                z = float(el.get("PhysicalSizeZ", z))
                return (z, y, x)
    page = tif.pages[0]
    ij = tif.imagej_metadata or {}
    if "spacing" in ij:
        z = float(ij["spacing"])
    for tag_name, axis in (("XResolution", "x"), ("YResolution", "y")):
        tag = page.tags.get(tag_name)
        if tag is None:
            continue
        num, den = tag.value
        if num > 0 and den > 0 and not (num == 1 and den == 1 and not ij):
            value = den / num
            if axis == "x":
                x = value
            else:
                y = value
    return (z, y, x)


def available_memory() -> int:
    """Bytes this process could still allocate (RAM available now, psutil; else free pages, sysconf)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover - psutil is a dependency; sysconf is the fallback on Linux
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_fits_in_memory(shape: tuple[int, ...], dtype: np.dtype, path: Path) -> None:
    """Refuse, before decoding, a stack whose header declares more voxels than memory can hold: a 2 MB
    file may declare a 2 GB image (a sparse or crafted TIFF), and decoding it first would exhaust the
    machine before any check ran."""
    need = int(np.prod([int(s) for s in shape], dtype=object)) * np.dtype(dtype).itemsize
    have = available_memory()
    if need > have:
        raise InputError(f"the header declares a {'x'.join(str(int(s)) for s in shape)} {np.dtype(dtype)} image: "
                         f"decoding it needs {need / 2**30:.1f} GiB, only {have / 2**30:.1f} GiB of memory is "
                         "available (crop or downsample the stack, or read it as OME-Zarr)", path)


def read_tiff(path: Path, channel: int = 0, lazy: bool = False) -> Volume:
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            axes = series.axes
            check_fits_in_memory(tuple(series.shape), series.dtype, path)  # from the header, nothing decoded
            data = series.asarray()
            spacing = _tiff_spacing(tif)
    except (tifffile.TiffFileError, ValueError, EOFError, OSError, IndexError) as exc:
        raise InputError(f"not a readable TIFF (corrupt or truncated?): {exc}", path) from exc
    axes = axes.replace("I", "Z").replace("Q", "Z")
    if data.ndim == 3 and set(axes) - set("ZYX"):
        axes = "ZYX"  # unnamed third axis of a plain multipage TIFF: slices
    data = select_3d(data, axes, str(path), channel)
    return Volume(np.ascontiguousarray(data), spacing, str(path))


def write_tiff(path: Path, data: np.ndarray, spacing: Spacing) -> Path:
    """ImageJ hyperstack (opens in Fiji with its calibration; also read by napari and Vaa3D)."""
    import tifffile

    z, y, x = spacing
    if data.dtype not in (np.uint8, np.uint16, np.float32):
        data = data.astype(np.float32 if np.issubdtype(data.dtype, np.floating) else np.uint16)
    with atomic_path(path) as tmp:
        tifffile.imwrite(tmp, data, imagej=True, resolution=(1.0 / x, 1.0 / y),
                         metadata={"spacing": z, "unit": "um", "axes": "ZYX"}, compression="zlib")
    return path


# ----------------------------------------------------------------------------------------- Vaa3D
def read_v3draw(path: Path, channel: int = 0, lazy: bool = False) -> Volume:
    data = v3d.read_v3d(path)  # C, Z, Y, X
    return Volume(select_3d(data, "CZYX", str(path), channel), DEFAULT_SPACING, str(path))


def write_v3draw(path: Path, data: np.ndarray, spacing: Spacing) -> Path:
    with atomic_path(path) as tmp:
        v3d.write_v3draw(tmp, data)
    return path


# ----------------------------------------------------------------------------------------- Zarr
def _open_zarr(path: Path):
    import zarr

    return zarr.open(str(path), mode="r")


def read_zarr(path: Path, channel: int = 0, lazy: bool = True) -> Volume:
    """Plain zarr array, or OME-Zarr (NGFF multiscales: level 0 and its scale transform). Lazy by default."""
    import zarr

    node = _open_zarr(path)
    spacing = DEFAULT_SPACING
    axes = "ZYX"
    if isinstance(node, zarr.Group):
        attrs = dict(node.attrs)
        ms = attrs.get("multiscales") or attrs.get("ome", {}).get("multiscales")
        if not ms:
            raise InputError("zarr group without OME 'multiscales' metadata; point at the array instead", path)
        ms0 = ms[0]
        ds0 = ms0["datasets"][0]
        arr = node[ds0["path"]]
        names = [a["name"] if isinstance(a, dict) else a for a in ms0.get("axes", [])] or list("zyx")[-arr.ndim:]
        axes = "".join(n[0].upper() for n in names)
        scale = [1.0] * arr.ndim
        for tr in ds0.get("coordinateTransformations", []):
            if tr.get("type") == "scale":
                scale = tr["scale"]
        sp = {a: float(s) for a, s in zip(axes, scale)}
        spacing = (sp.get("Z", 1.0), sp.get("Y", 1.0), sp.get("X", 1.0))
    else:
        arr = node
        sp = arr.attrs.get("spacing")
        if sp is not None:
            spacing = tuple(float(s) for s in sp)  # type: ignore[assignment]
        if arr.ndim != 3:
            axes = "CZYX"[-arr.ndim:] if arr.ndim <= 4 else "TCZYX"
    if axes == "ZYX" and lazy:
        return Volume(arr, spacing, str(path))
    data = np.asarray(arr[...])
    return Volume(select_3d(data, axes, str(path), channel), spacing, str(path))


def write_zarr(path: Path, data: np.ndarray, spacing: Spacing) -> Path:
    import zarr

    chunks = tuple(min(s, c) for s, c in zip(data.shape, (64, 256, 256)))
    with atomic_path(path, is_dir=True) as tmp:
        arr = zarr.open_array(str(tmp), mode="w", shape=data.shape, dtype=data.dtype, chunks=chunks)
        arr[...] = data
        arr.attrs["spacing"] = list(spacing)
        arr.attrs["axes"] = "ZYX"
    return path


def write_ome_zarr(path: Path, data: np.ndarray, spacing: Spacing) -> Path:
    """One-level OME-Zarr (NGFF 0.4 layout: group attrs 'multiscales', array '0'); opens in napari."""
    import zarr

    chunks = tuple(min(s, c) for s, c in zip(data.shape, (64, 256, 256)))
    with atomic_path(path, is_dir=True) as tmp:
        root = zarr.open_group(str(tmp), mode="w")
        root.create_array("0", shape=data.shape, dtype=data.dtype, chunks=chunks)[...] = data
        root.attrs["multiscales"] = [{
            "version": "0.4",
            "axes": [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
            "datasets": [{"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": list(spacing)}]}],
        }]
    return path


# ----------------------------------------------------------------------------------------- npy
def read_npy(path: Path, channel: int = 0, lazy: bool = False) -> Volume:
    try:
        data = np.load(path, mmap_mode="r" if lazy else None, allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"not a readable .npy file: {exc}", path) from exc
    side = path.with_suffix(".json")
    spacing = DEFAULT_SPACING
    if side.exists():
        spacing = tuple(json.loads(side.read_text()).get("spacing", spacing))  # type: ignore[assignment]
    axes = {3: "ZYX", 4: "CZYX", 2: "YX"}.get(data.ndim, "TCZYX"[-data.ndim:])
    return Volume(select_3d(np.asarray(data), axes, str(path), channel), spacing, str(path))


def write_npy(path: Path, data: np.ndarray, spacing: Spacing) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, data)
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps({"spacing": list(spacing), "axes": "ZYX"}))
    return path


_READERS: dict[str, Reader] = {
    ".tif": read_tiff, ".tiff": read_tiff, ".ome.tif": read_tiff, ".ome.tiff": read_tiff,
    ".v3draw": read_v3draw, ".raw": read_v3draw, ".v3dpbd": read_v3draw,
    ".zarr": read_zarr, ".ome.zarr": read_zarr, ".npy": read_npy,
}
_WRITERS: dict[str, Writer] = {
    ".tif": write_tiff, ".tiff": write_tiff, ".v3draw": write_v3draw,
    ".zarr": write_zarr, ".ome.zarr": write_ome_zarr, ".npy": write_npy,
}


def reader_for(path: Path) -> Reader:
    suffix = _suffix(path)
    if suffix not in _READERS:
        raise InputError(f"unsupported stack format {suffix!r}; use one of {sorted(_READERS)}", path)
    return _READERS[suffix]


def writer_for(path: Path) -> Writer:
    suffix = _suffix(path)
    if suffix not in _WRITERS:
        raise InputError(f"cannot write format {suffix!r}; use one of {sorted(_WRITERS)}", path)
    return _WRITERS[suffix]
