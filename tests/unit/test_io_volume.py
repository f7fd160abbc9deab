"""Volume readers/writers: round trips keep data and spacing; bad files give clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile

from neurorefiner.errors import InputError
from neurorefiner.io import Volume, check_same_shape, read_mask, read_volume, v3d, write_volume

SPACING = (1.0, 0.33, 0.33)


@pytest.fixture
def stack() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, size=(6, 20, 24), dtype=np.uint8)


@pytest.mark.parametrize("suffix", [".tif", ".v3draw", ".zarr", ".ome.zarr", ".npy"])
def test_roundtrip_keeps_data(tmp_path: Path, stack: np.ndarray, suffix: str) -> None:
    path = write_volume(tmp_path / f"x{suffix}", Volume(stack, SPACING))
    back = read_volume(path)
    np.testing.assert_array_equal(back.load(), stack)
    assert back.shape == stack.shape


@pytest.mark.parametrize("suffix", [".tif", ".zarr", ".ome.zarr", ".npy"])
def test_roundtrip_keeps_spacing(tmp_path: Path, stack: np.ndarray, suffix: str) -> None:
    back = read_volume(write_volume(tmp_path / f"x{suffix}", Volume(stack, SPACING)))
    np.testing.assert_allclose(back.spacing, SPACING, rtol=1e-5)


def test_uint16_and_float_tiff(tmp_path: Path) -> None:
    for dtype in (np.uint16, np.float32):
        data = (np.arange(2 * 3 * 4).reshape(2, 3, 4) * 7).astype(dtype)
        back = read_volume(write_volume(tmp_path / f"x_{np.dtype(dtype).name}.tif", data))
        assert back.dtype == dtype
        np.testing.assert_array_equal(back.load(), data)


def test_ome_tiff_spacing(tmp_path: Path, stack: np.ndarray) -> None:
    path = tmp_path / "ome.ome.tif"
    tifffile.imwrite(path, stack, ome=True, metadata={"axes": "ZYX", "PhysicalSizeX": 0.2,
                                                      "PhysicalSizeY": 0.25, "PhysicalSizeZ": 2.0})
    assert read_volume(path).spacing == pytest.approx((2.0, 0.25, 0.2))


def test_bool_mask_written_as_0_255(tmp_path: Path) -> None:
    mask = np.zeros((3, 4, 5), bool)
    mask[1, 2, 3] = True
    path = write_volume(tmp_path / "m.tif", mask)
    raw = tifffile.imread(path)
    assert raw.dtype == np.uint8 and set(np.unique(raw)) == {0, 255}
    np.testing.assert_array_equal(read_mask(path).load(), mask)


def test_v3draw_layout_matches_vaa3d(tmp_path: Path) -> None:
    """Header fields and X-fastest voxel order, written by hand as Vaa3D does."""
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)  # Z, Y, X
    header = v3d.RAW_MAGIC + b"L" + np.array([1], "<i2").tobytes() + np.array([4, 3, 2, 1], "<i4").tobytes()
    path = tmp_path / "hand.v3draw"
    path.write_bytes(header + data.tobytes())
    np.testing.assert_array_equal(read_volume(path).load(), data)


def test_v3draw_old_two_byte_sizes(tmp_path: Path) -> None:
    data = np.arange(2 * 3 * 4, dtype=np.uint16).reshape(2, 3, 4)
    header = v3d.RAW_MAGIC + b"L" + np.array([2], "<i2").tobytes() + np.array([4, 3, 2, 1], "<i2").tobytes()
    path = tmp_path / "old.v3draw"
    path.write_bytes(header + data.astype("<u2").tobytes())
    np.testing.assert_array_equal(read_volume(path).load(), data)


def test_v3dpbd_decodes_all_run_kinds(tmp_path: Path) -> None:
    """A hand-made PBD stream with a literal, a difference and a repeat run."""
    # literal 3 bytes [10, 11, 12]; difference run of 5 values from prior 12: +1, +2, -1, 0, +1
    diffs = [1, 2, 3, 0, 1]
    b0 = diffs[0] | (diffs[1] << 2) | (diffs[2] << 4) | (diffs[3] << 6)
    b1 = diffs[4]
    body = bytes([2, 10, 11, 12]) + bytes([32 + 5, b0, b1]) + bytes([127 + 4, 200])
    expected = np.array([10, 11, 12, 13, 15, 14, 14, 15, 200, 200, 200, 200], np.uint8)
    header = v3d.PBD_MAGIC + b"L" + np.array([1], "<i2").tobytes() + np.array([6, 1, 2, 1], "<i4").tobytes()
    path = tmp_path / "x.v3dpbd"
    path.write_bytes(header + body)
    np.testing.assert_array_equal(read_volume(path).load().ravel(), expected)


def test_v3dpbd_encoder_roundtrip(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    data = np.zeros((4, 16, 16), np.uint8)
    data[1:3, 4:12, 4:12] = rng.integers(0, 255, (2, 8, 8))
    header = v3d.PBD_MAGIC + b"L" + np.array([1], "<i2").tobytes() + np.array([16, 16, 4, 1], "<i4").tobytes()
    path = tmp_path / "y.v3dpbd"
    path.write_bytes(header + v3d.compress_pbd8(data))
    np.testing.assert_array_equal(read_volume(path).load(), data)


def test_zarr_is_lazy(tmp_path: Path, stack: np.ndarray) -> None:
    path = write_volume(tmp_path / "lazy.zarr", stack)
    vol = read_volume(path, lazy=True)
    assert not isinstance(vol.array, np.ndarray)
    np.testing.assert_array_equal(vol.array[2], stack[2])


def test_diadem_op1_loads_as_documented(diadem_dir: Path) -> None:
    from neurorefiner.data import get_dataset

    case = get_dataset("diadem").cases("dev")[0]
    vol = case.image()
    assert case.name == "OP_1"
    assert vol.shape == (60, 512, 512) and vol.dtype == np.uint8
    assert vol.spacing == (1.0, 0.33, 0.33)


# ------------------------------------------------------------------------- bad input
def test_corrupt_tiff(tmp_path: Path) -> None:
    path = tmp_path / "bad.tif"
    path.write_bytes(b"II*\x00garbage" * 3)
    with pytest.raises(InputError, match="bad.tif"):
        read_volume(path)


def test_truncated_tiff(tmp_path: Path, stack: np.ndarray) -> None:
    good = write_volume(tmp_path / "good.tif", stack)
    cut = tmp_path / "cut.tif"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(InputError, match="cut.tif"):
        read_volume(cut).load()


def test_2d_image_refused(tmp_path: Path) -> None:
    path = tmp_path / "flat.tif"
    tifffile.imwrite(path, np.zeros((20, 20), np.uint8))
    with pytest.raises(InputError, match="2D"):
        read_volume(path)


def test_multichannel_picks_channel_and_says_so(tmp_path: Path) -> None:
    data = np.stack([np.full((4, 5, 6), c, np.uint8) for c in range(3)], axis=1)  # Z C Y X
    path = tmp_path / "mc.tif"
    tifffile.imwrite(path, data, imagej=True, metadata={"axes": "ZCYX"})
    with pytest.warns(UserWarning, match="channel 0"):
        assert read_volume(path).load().max() == 0
    with pytest.warns(UserWarning, match="channel 2"):
        assert read_volume(path, channel=2).load().min() == 2
    with pytest.raises(InputError, match="3 channels"):
        read_volume(path, channel=5)


def test_non_binary_mask(tmp_path: Path) -> None:
    path = write_volume(tmp_path / "labels.tif", np.arange(60, dtype=np.uint8).reshape(3, 4, 5))
    with pytest.raises(InputError, match="not binary"):
        read_mask(path)


def test_shape_mismatch() -> None:
    a = Volume(np.zeros((2, 3, 4)), source="img.tif")
    b = Volume(np.zeros((2, 3, 5)), source="mask.tif")
    with pytest.raises(InputError, match="mask.tif.*differs"):
        check_same_shape(a, b)


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    (tmp_path / "x.png").write_bytes(b"\x89PNG")
    with pytest.raises(InputError, match="unsupported"):
        read_volume(tmp_path / "x.png")
    with pytest.raises(InputError, match="not found"):
        read_volume(tmp_path / "nope.tif")


def test_bad_spacing_and_nan() -> None:
    with pytest.raises(InputError, match="spacing"):
        Volume(np.zeros((2, 2, 2)), (1.0, -1.0, 1.0))
    vol = Volume(np.full((2, 2, 2), np.nan, np.float32), source="nan.tif")
    with pytest.raises(InputError, match="NaN"):
        vol.normalized()


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "out.tif"
    with pytest.raises(InputError):
        write_volume(target, Volume(np.zeros((2, 2, 2), np.uint8), (1, 1, 1)), spacing=(0, 1, 1))
    assert list(tmp_path.iterdir()) == []
