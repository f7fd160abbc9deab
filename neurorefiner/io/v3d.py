"""Vaa3D raw stacks: .v3draw (read/write) and .v3dpbd (8-bit PBD read; 16-bit PBD is refused clearly).

Layout (Vaa3D ``stackutil``): a 24-byte magic, one byte of endianness ('L'/'B'), a 2-byte data type
(1 = uint8, 2 = uint16, 4 = float32), four sizes X, Y, Z, C (4-byte ints; 2-byte in old files), then
voxels with X fastest, i.e. a C-order array of shape (C, Z, Y, X). PBD files use the same header with
another magic and a packbits-difference compressed body.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError

RAW_MAGIC = b"raw_image_stack_by_hpeng"
PBD_MAGIC = b"v3d_volume_pkbitdf_encod"
_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.float32}


def _parse_header(buf: bytes, path: Path, compressed: bool) -> tuple[np.dtype, tuple[int, ...], int]:
    if len(buf) < 27:
        raise InputError("file too short for a Vaa3D header (truncated?)", path)
    magic = buf[:24]
    if magic not in (RAW_MAGIC, PBD_MAGIC):
        raise InputError("not a Vaa3D raw/PBD file (bad magic)", path)
    endian = {b"L": "<", b"B": ">"}.get(buf[24:25])
    if endian is None:
        raise InputError(f"bad endianness byte {buf[24:25]!r}", path)
    dcode = int(np.frombuffer(buf[25:27], dtype=endian + "i2")[0])
    if dcode not in _DTYPES:
        raise InputError(f"unsupported Vaa3D data type code {dcode}", path)
    dtype = np.dtype(_DTYPES[dcode]).newbyteorder(endian)
    for size_bytes in (4, 2):
        end = 27 + 4 * size_bytes
        if len(buf) < end:
            continue
        sizes = tuple(int(s) for s in np.frombuffer(buf[27:end], dtype=f"{endian}i{size_bytes}"))
        if any(s <= 0 for s in sizes):
            continue
        n = int(np.prod(sizes)) * dtype.itemsize
        if compressed or len(buf) - end == n:
            return dtype, sizes, end
    raise InputError("header sizes do not match the file length (truncated or corrupt)", path)


def read_v3d(path: str | Path) -> np.ndarray:
    """Read .v3draw or .v3dpbd into a (C, Z, Y, X) array."""
    path = Path(path)
    buf = path.read_bytes()
    compressed = buf[:24] == PBD_MAGIC
    dtype, (sx, sy, sz, sc), offset = _parse_header(buf, path, compressed)
    n = sx * sy * sz * sc
    if compressed:
        if dtype.itemsize == 1:
            flat = decompress_pbd8(np.frombuffer(buf, np.uint8, offset=offset), n)
        else:
            raise InputError("only 8-bit .v3dpbd is supported; save 16-bit stacks as .v3draw or TIFF "
                             "in Vaa3D (File > Save as)", path)
        if flat.size != n:
            raise InputError(f"PBD body decodes to {flat.size} voxels, header says {n} (truncated?)", path)
    else:
        flat = np.frombuffer(buf, dtype=dtype, count=n, offset=offset)
    return flat.reshape(sc, sz, sy, sx).astype(dtype.newbyteorder("="))


def write_v3draw(path: str | Path, data: np.ndarray) -> None:
    """Write a ZYX (or CZYX) array as little-endian .v3draw with 4-byte sizes."""
    if data.ndim == 3:
        data = data[None]
    if data.dtype == bool:
        data = data.astype(np.uint8) * 255
    code = {np.dtype(np.uint8): 1, np.dtype(np.uint16): 2, np.dtype(np.float32): 4}.get(data.dtype)
    if code is None:
        data = data.astype(np.float32)
        code = 4
    sc, sz, sy, sx = data.shape
    header = (RAW_MAGIC + b"L" + np.array([code], "<i2").tobytes()
              + np.array([sx, sy, sz, sc], "<i4").tobytes())
    with open(path, "wb") as fh:
        fh.write(header)
        fh.write(np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<")).tobytes())


def _pbd8_kernel(src: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.uint8)
    cp = 0
    dp = 0
    prior = 0
    m = src.size
    while cp < m and dp < n:
        value = int(src[cp])
        if value < 33:  # literal run of value + 1 bytes
            count = value + 1
            out[dp:dp + count] = src[cp + 1:cp + 1 + count]
            dp += count
            cp += count + 1
            prior = int(out[dp - 1])
        elif value < 128:  # run of 2-bit differences (0, +1, +2, -1), four per byte
            left = value - 32
            while left > 0:
                cp += 1
                byte = int(src[cp])
                fill = min(left, 4)
                for k in range(fill):
                    d = (byte >> (2 * k)) & 3
                    prior = (prior - 1 if d == 3 else prior + d) & 0xFF
                    out[dp] = prior
                    dp += 1
                left -= fill
            cp += 1
        else:  # repeat run
            count = value - 127
            cp += 1
            prior = int(src[cp])
            out[dp:dp + count] = prior
            dp += count
            cp += 1
    return out[:dp]


try:  # the decoder is a byte-wise state machine: compile it when numba is there
    import numba

    _pbd8_kernel = numba.njit(cache=True)(_pbd8_kernel)  # type: ignore[assignment]
except ImportError:  # pragma: no cover
    pass


def decompress_pbd8(src: np.ndarray, n: int) -> np.ndarray:
    """Decode Vaa3D's 8-bit packbits-difference stream into ``n`` bytes."""
    return _pbd8_kernel(np.ascontiguousarray(src, np.uint8), n)


def compress_pbd8(data: np.ndarray) -> bytes:
    """Encode bytes with literal and repeat runs (a valid PBD stream; used for tests and export)."""
    flat = np.ascontiguousarray(data, np.uint8).ravel()
    out = bytearray()
    i = 0
    n = flat.size
    while i < n:
        j = i
        while j + 1 < n and flat[j + 1] == flat[i] and j - i + 1 < 128:
            j += 1
        run = j - i + 1
        if run >= 3:
            out += bytes([127 + run, int(flat[i])])
            i = j + 1
            continue
        k = i
        while k < n and k - i < 33:
            if k + 2 < n and flat[k] == flat[k + 1] == flat[k + 2]:
                break
            k += 1
        count = max(1, k - i)
        out += bytes([count - 1]) + flat[i:i + count].tobytes()
        i += count
    return bytes(out)
