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
from neurorefiner.io.volume import DEFAULT_SPACING, Spacing, Volume, select_3d, unit_to_um

Reader = Callable[..., Volume]
#: spacing None: the data has no known voxel size, and the file is written without one (never as 1 um)
Writer = Callable[[Path, np.ndarray, "Spacing | None"], Path]


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in (".ome.zarr", ".ome.tiff", ".ome.tif"):
        if name.endswith(s):
            return s
    return path.suffix.lower()


# ----------------------------------------------------------------------------------------- TIFF
def _tiff_calibration(tif, path: Path) -> tuple[Spacing, str | None, str | None]:
    """(spacing z, y, x in um, where it came from, a note on a partial calibration) from the file's metadata,
    read with tifffile's own parsers: OME-XML ``Pixels`` PhysicalSizeX/Y/Z and their units
    (:func:`tifffile.xml2dict`), else ImageJ's description (``unit``, ``spacing`` for z) with the
    XResolution/YResolution tags (pixels per unit, :attr:`TiffPage.resolution`), else the TIFF resolution
    unit (inch, cm) for x and y. Without a full x, y, z calibration the spacing is the placeholder and the
    source None: a file with no voxel size is never read as 1 um silently."""
    import tifffile

    if tif.is_ome and tif.ome_metadata:
        try:
            pixels = _ome_pixels(tifffile.xml2dict(tif.ome_metadata))
        except Exception:  # noqa: BLE001 - unreadable OME-XML: fall back to the TIFF tags, as Fiji does
            pixels = {}
        sizes = {}
        for axis in "ZYX":
            value = pixels.get(f"PhysicalSize{axis}")
            if value is not None:
                factor = unit_to_um(pixels.get(f"PhysicalSize{axis}Unit", "\u00b5m"), str(path))
                sizes[axis] = float(value) * (1.0 if factor is None else factor)
        if len(sizes) == 3:
            return (sizes["Z"], sizes["Y"], sizes["X"]), "OME-XML PhysicalSizeX/Y/Z", None
        if sizes:
            return DEFAULT_SPACING, None, f"its OME-XML gives only PhysicalSize{'/'.join(sorted(sizes))}"
    page = tif.pages[0]
    xres, yres = (float(v) for v in page.resolution)   # pixels per resolution unit
    has_res = xres > 0 and yres > 0 and (xres, yres) != (1.0, 1.0)
    ij = tif.imagej_metadata or {}
    if tif.is_imagej:
        factor = unit_to_um(ij.get("unit"), str(path))
        if factor is not None or has_res:
            f = 1.0 if factor is None else factor
            how = "ImageJ metadata" + ("" if factor is not None else " (no unit; read as um)")
            x = f / xres if xres > 0 else f
            y = f / yres if yres > 0 else f
            return (float(ij.get("spacing", 1.0)) * f, y, x), how, None
        if "spacing" in ij:
            return DEFAULT_SPACING, None, "its ImageJ metadata gives a z spacing but no unit or pixel size"
        return DEFAULT_SPACING, None, None
    unit = {2: 25400.0, 3: 1e4, 4: 1e3, 5: 1.0}.get(int(page.resolutionunit))  # inch, cm, mm, um
    if unit is not None and has_res:
        return DEFAULT_SPACING, None, (f"its resolution tags give x, y = {unit / xres:.4g}, {unit / yres:.4g} um "
                                       "but nothing gives z")
    return DEFAULT_SPACING, None, None


def _ome_pixels(tree: dict) -> dict:
    """The first image's ``Pixels`` attributes of an OME-XML document parsed by :func:`tifffile.xml2dict`."""
    image = tree.get("OME", {}).get("Image", {})
    if isinstance(image, list):
        image = image[0] if image else {}
    return image.get("Pixels", {}) if isinstance(image, dict) else {}


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
            spacing, calibration, note = _tiff_calibration(tif, path)
    except InputError:
        raise
    except (tifffile.TiffFileError, ValueError, EOFError, OSError, IndexError) as exc:
        raise InputError(f"not a readable TIFF (corrupt or truncated?): {exc}", path) from exc
    axes = axes.replace("I", "Z").replace("Q", "Z")
    if data.ndim == 3 and set(axes) - set("ZYX"):
        axes = "ZYX"  # unnamed third axis of a plain multipage TIFF: slices
    data = select_3d(data, axes, str(path), channel)
    return Volume(np.ascontiguousarray(data), spacing, str(path), {"calibration_note": note} if note else {},
                  calibration)


def write_tiff(path: Path, data: np.ndarray, spacing: Spacing | None) -> Path:
    """ImageJ hyperstack (opens in Fiji with its calibration; also read by napari and Vaa3D); without a spacing,
    an uncalibrated one."""
    import tifffile

    if data.dtype not in (np.uint8, np.uint16, np.float32):
        data = data.astype(np.float32 if np.issubdtype(data.dtype, np.floating) else np.uint16)
    calibration: dict = {"metadata": {"axes": "ZYX"}}
    if spacing is not None:
        z, y, x = spacing
        calibration = {"resolution": (1.0 / x, 1.0 / y), "metadata": {"spacing": z, "unit": "um", "axes": "ZYX"}}
    with atomic_path(path) as tmp:
        tifffile.imwrite(tmp, data, imagej=True, compression="zlib", **calibration)
    return path


# ----------------------------------------------------------------------------------------- Vaa3D
def read_v3draw(path: Path, channel: int = 0, lazy: bool = False) -> Volume:
    data = v3d.read_v3d(path)  # C, Z, Y, X
    return Volume(select_3d(data, "CZYX", str(path), channel), DEFAULT_SPACING, str(path),
                  calibration=None)  # the format holds no voxel size


def write_v3draw(path: Path, data: np.ndarray, spacing: Spacing | None) -> Path:
    with atomic_path(path) as tmp:
        v3d.write_v3draw(tmp, data)
    return path


# ----------------------------------------------------------------------------------------- Zarr
def _open_zarr(path: Path):
    import zarr

    return zarr.open(str(path), mode="r")


def read_zarr(path: Path, channel: int = 0, lazy: bool = True) -> Volume:
    """Plain zarr array, or OME-Zarr (NGFF multiscales: level 0 and its scale transform, in um). Lazy by default."""
    from neurorefiner.io.ome_zarr import level0

    arr, array_path, names, scale, calibration = level0(_open_zarr(path), path)
    if not array_path and arr.ndim != 3:  # a plain array: leading axes read as channel (and time)
        axes = "CZYX"[-arr.ndim:] if arr.ndim <= 4 else "TCZYX"
    else:
        axes = "".join(n[0].upper() for n in names)
    spacing = tuple(scale[-3:]) if calibration else DEFAULT_SPACING
    if axes == "ZYX" and lazy:
        return Volume(arr, spacing, str(path), calibration=calibration)  # type: ignore[arg-type]
    data = np.asarray(arr[...])
    return Volume(select_3d(data, axes, str(path), channel), spacing, str(path),  # type: ignore[arg-type]
                  calibration=calibration)


def write_zarr(path: Path, data: np.ndarray, spacing: Spacing | None) -> Path:
    import zarr

    chunks = tuple(min(s, c) for s, c in zip(data.shape, (64, 256, 256)))
    with atomic_path(path, is_dir=True) as tmp:
        arr = zarr.open_array(str(tmp), mode="w", shape=data.shape, dtype=data.dtype, chunks=chunks)
        arr[...] = data
        if spacing is not None:
            arr.attrs["spacing"] = list(spacing)
        arr.attrs["axes"] = "ZYX"
    return path


def write_ome_zarr(path: Path, data: np.ndarray, spacing: Spacing | None) -> Path:
    """One-level OME-Zarr (NGFF 0.4 layout: group attrs 'multiscales', array '0'); opens in napari. NGFF asks for
    a scale: without a spacing, 1 per voxel and no unit on the axes (read back as uncalibrated)."""
    import zarr

    chunks = tuple(min(s, c) for s, c in zip(data.shape, (64, 256, 256)))
    with atomic_path(path, is_dir=True) as tmp:
        root = zarr.open_group(str(tmp), mode="w")
        root.create_array("0", shape=data.shape, dtype=data.dtype, chunks=chunks)[...] = data
        root.attrs["multiscales"] = [{
            "version": "0.4",
            "axes": [{"name": n, "type": "space", **({"unit": "micrometer"} if spacing else {})} for n in "zyx"],
            "datasets": [{"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": list(spacing or DEFAULT_SPACING)}]}],
        }]
    return path


# ----------------------------------------------------------------------------------------- npy
def read_npy(path: Path, channel: int = 0, lazy: bool = False) -> Volume:
    try:
        data = np.load(path, mmap_mode="r" if lazy else None, allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"not a readable .npy file: {exc}", path) from exc
    side = path.with_suffix(".json")
    spacing, calibration = DEFAULT_SPACING, None
    if side.exists() and "spacing" in json.loads(side.read_text()):
        spacing = tuple(json.loads(side.read_text())["spacing"])  # type: ignore[assignment]
        calibration = f"'spacing' of {side.name}"
    axes = {3: "ZYX", 4: "CZYX", 2: "YX"}.get(data.ndim, "TCZYX"[-data.ndim:])
    return Volume(select_3d(np.asarray(data), axes, str(path), channel), spacing, str(path), calibration=calibration)


def write_npy(path: Path, data: np.ndarray, spacing: Spacing | None) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, data)
    with atomic_path(path.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps({"axes": "ZYX", **({"spacing": list(spacing)} if spacing else {})}))
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
