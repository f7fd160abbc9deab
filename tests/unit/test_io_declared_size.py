"""A stack whose header declares more than memory holds is refused from its header, before any decoding:
a 2 MB TIFF may declare a 2 GB (here 500 GB) image, and decoding it first would take the machine down."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.errors import InputError
from neurorefiner.io import formats, read_volume


def crafted_tiff(path: Path, pages: int = 100, side: int = 50_000) -> Path:
    """A classic little-endian TIFF of ``pages`` uint16 pages of ``side`` x ``side`` whose strips all point
    at the same 16 bytes: a few kilobytes on disk, ``pages * side**2 * 2`` bytes declared."""
    entries = [(256, 4, side), (257, 4, side), (258, 3, 16), (259, 3, 1), (262, 3, 1), (273, 4, 8),
               (277, 3, 1), (278, 4, side), (279, 4, 16)]
    ifd_size = 2 + 12 * len(entries) + 4
    first = 8 + 16
    out = bytearray(b"II*\x00" + struct.pack("<I", first) + bytes(16))
    for i in range(pages):
        out += struct.pack("<H", len(entries))
        for tag, kind, value in entries:
            packed = struct.pack("<H", value) + b"\x00\x00" if kind == 3 else struct.pack("<I", value)
            out += struct.pack("<HHI", tag, kind, 1) + packed
        nxt = first + (i + 1) * ifd_size if i + 1 < pages else 0
        out += struct.pack("<I", nxt)
    path.write_bytes(bytes(out))
    return path


def test_a_huge_declared_tiff_is_refused_from_its_header(tmp_path: Path) -> None:
    path = crafted_tiff(tmp_path / "huge.tif")
    assert path.stat().st_size < 100_000
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="huge.tif") as err:
        read_volume(path)
    assert time.perf_counter() - t0 < 5.0
    message = str(err.value)
    assert "100x50000x50000 uint16" in message and "465.7 GiB" in message and "available" in message


def test_what_fits_is_still_read_and_the_limit_is_the_available_memory(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import tifffile

    path = tmp_path / "small.tif"
    tifffile.imwrite(path, np.ones((4, 16, 16), np.uint8))
    assert read_volume(path).shape == (4, 16, 16)
    monkeypatch.setattr(formats, "available_memory", lambda: 1000)
    with pytest.raises(InputError, match=r"needs 0\.0 GiB, only 0\.0 GiB"):
        read_volume(path)
