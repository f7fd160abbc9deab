"""The voxel size is never silent: read from ImageJ / OME-TIFF / OME-Zarr metadata (in um), given, assumed out
loud, or the command stops with one line naming the file and the fix; the run's trace header records it and a
run at another spacing never resumes the old decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile
from hydra import compose, initialize_config_dir

from neurorefiner.errors import InputError
from neurorefiner.io import read_mask, read_volume, write_volume
from neurorefiner.io.ome_zarr import open_ome_zarr, write_ome_zarr_volume
from neurorefiner.io.spacing import CLI, resolve_spacing

ROOT = Path(__file__).resolve().parents[2]
DIADEM = (1.0, 0.33, 0.33)


def stack(shape=(6, 16, 16)) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.random.default_rng(0).integers(0, 255, shape, dtype=np.uint8)


def test_a_plain_tiff_has_no_calibration_and_resolving_it_names_the_file_and_the_fix(tmp_path: Path) -> None:
    tifffile.imwrite(tmp_path / "plain.tif", stack())
    vol = read_volume(tmp_path / "plain.tif")
    assert vol.calibration is None
    with pytest.raises(InputError) as err:
        resolve_spacing(None, vol)
    line = str(err.value)
    assert "\n" not in line and str(tmp_path / "plain.tif") in line
    assert "spacing=[1.0,0.33,0.33]" in line and "spacing=assume" in line
    with pytest.raises(InputError, match="--spacing 1.0,0.33,0.33"):
        resolve_spacing(None, vol, spelling=CLI)


def test_imagej_calibration_is_read_in_um(tmp_path: Path) -> None:
    write_volume(tmp_path / "ij.tif", stack(), spacing=DIADEM)
    vol = read_volume(tmp_path / "ij.tif")
    assert np.allclose(vol.spacing, DIADEM) and vol.calibration == "ImageJ metadata"
    choice = resolve_spacing(None, vol)
    assert np.allclose(choice.values, DIADEM) and str(tmp_path / "ij.tif") in choice.source
    # nanometres, as Fiji writes them for an electron-microscopy stack
    tifffile.imwrite(tmp_path / "nm.tif", stack(), imagej=True, resolution=(1 / 330.0, 1 / 330.0),
                     metadata={"spacing": 1000.0, "unit": "nm", "axes": "ZYX"})
    assert np.allclose(read_volume(tmp_path / "nm.tif").spacing, DIADEM)


def test_ome_tiff_physical_sizes_and_units_are_read(tmp_path: Path) -> None:
    tifffile.imwrite(tmp_path / "a.ome.tif", stack(), ome=True,
                     metadata={"axes": "ZYX", "PhysicalSizeX": 0.33, "PhysicalSizeY": 0.33, "PhysicalSizeZ": 1000.0,
                               "PhysicalSizeZUnit": "nm"})
    vol = read_volume(tmp_path / "a.ome.tif")
    assert np.allclose(vol.spacing, DIADEM) and vol.calibration.startswith("OME-XML")
    # x and y alone are not a voxel size: refused with what the file does say
    tifffile.imwrite(tmp_path / "xy.ome.tif", stack(), ome=True,
                     metadata={"axes": "ZYX", "PhysicalSizeX": 0.33, "PhysicalSizeY": 0.33})
    part = read_volume(tmp_path / "xy.ome.tif")
    assert part.calibration is None
    with pytest.raises(InputError, match="PhysicalSizeX/Y"):
        resolve_spacing(None, part)


def test_ome_zarr_scale_is_read_and_a_bare_store_is_not_calibrated(tmp_path: Path) -> None:
    write_ome_zarr_volume(tmp_path / "a.ome.zarr", stack(), DIADEM)
    source, spacing = open_ome_zarr(tmp_path / "a.ome.zarr")
    assert np.allclose(spacing, DIADEM) and source.calibration == "OME-Zarr scale"
    assert np.allclose(resolve_spacing(None, source).values, DIADEM)
    assert read_volume(tmp_path / "a.ome.zarr").calibration == "OME-Zarr scale"
    write_volume(tmp_path / "bare.ome.zarr", _uncalibrated(tmp_path))
    assert read_volume(tmp_path / "bare.ome.zarr").calibration is None


def _uncalibrated(tmp_path: Path):  # type: ignore[no-untyped-def]
    tifffile.imwrite(tmp_path / "u.tif", stack())
    return read_volume(tmp_path / "u.tif")


def test_an_uncalibrated_volume_is_written_without_a_voxel_size(tmp_path: Path) -> None:
    """Reading a file with no voxel size and writing it again must not turn it into "1 um" on the way."""
    write_volume(tmp_path / "again.tif", _uncalibrated(tmp_path))
    assert read_volume(tmp_path / "again.tif").calibration is None


def test_given_wins_assume_warns_and_disagreeing_files_are_an_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    plain = _uncalibrated(tmp_path)
    given = resolve_spacing([1.0, 0.33, 0.33], plain)
    assert given.values == DIADEM and given.source == "argument"
    assert resolve_spacing("1,0.33,0.33", plain).values == DIADEM
    assumed = resolve_spacing("assume", plain)
    assert assumed.values == (1.0, 1.0, 1.0) and "assume" in assumed.source
    assert "warning: spacing=assume" in capsys.readouterr().err
    write_volume(tmp_path / "img.tif", stack(), spacing=DIADEM)
    write_volume(tmp_path / "msk.tif", stack() > 128, spacing=(2.0, 0.5, 0.5))
    image, mask = read_volume(tmp_path / "img.tif"), read_mask(tmp_path / "msk.tif")
    with pytest.raises(InputError, match="differs from that of the mask"):
        resolve_spacing(None, image, mask)
    assert resolve_spacing([1.0, 0.33, 0.33], image, mask).values == DIADEM
    assert "overrides the calibration of" in capsys.readouterr().err
    # the mask's calibration serves an uncalibrated image
    assert resolve_spacing(None, plain, mask).values == (2.0, 0.5, 0.5)


def compose_refine(overrides: list[str], report: bool = False):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="refine", overrides=[*overrides, "paths.output_dir=/tmp/nr-unused",
                                                        "progress=false", f"report={str(report).lower()}", "~tracing",
                                                        "agent=heuristic", "loop.block_size=64", "t_max=2",
                                                        "editor._target_=tests.unit.test_loop_build.region_editor"])


def test_refine_stops_on_an_uncalibrated_stack_with_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from neurorefiner.refine.entry import run

    tifffile.imwrite(tmp_path / "img.tif", stack())
    tifffile.imwrite(tmp_path / "msk.tif", (stack() > 200).astype(np.uint8))
    cfg = compose_refine([f"image={tmp_path / 'img.tif'}", f"mask={tmp_path / 'msk.tif'}", f"out={tmp_path / 'o'}"])
    with pytest.raises(SystemExit) as ended:
        run(cfg)
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "img.tif") in err and "spacing=" in err
    assert not (tmp_path / "o").exists()


def test_the_trace_records_the_spacing_and_another_spacing_never_resumes(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from neurorefiner.agents.trace import read_trace
    from neurorefiner.refine.entry import run
    from tests.unit.test_agent_loop import noisy_tree

    image, mask = noisy_tree()
    tifffile.imwrite(tmp_path / "img.tif", (image * 255).astype(np.uint8))
    tifffile.imwrite(tmp_path / "msk.tif", mask.astype(np.uint8))
    args = [f"image={tmp_path / 'img.tif'}", f"mask={tmp_path / 'msk.tif'}", f"out={tmp_path / 'o'}"]
    first = run(compose_refine([*args, "spacing=assume"]))
    header = read_trace(tmp_path / "o" / "trace.jsonl")[0]
    assert header["spacing"] == [1.0, 1.0, 1.0] and "assume" in header["spacing_from"]
    assert first["spacing (z, y, x) um"] == [1.0, 1.0, 1.0] and "assume" in first["spacing from"]
    capsys.readouterr()
    # the same spacing resumes ...
    run(compose_refine([*args, "spacing=assume"]))
    assert "resuming from" in capsys.readouterr().err
    # ... a corrected one is refused with a line that says why, and overwrite=true starts over
    with pytest.raises(SystemExit) as ended:
        run(compose_refine([*args, "spacing=[1.0,0.33,0.33]"]))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "spacing [1.0, 1.0, 1.0]" in err and "[1.0, 0.33, 0.33]" in err and "overwrite=true" in err
    second = run(compose_refine([*args, "spacing=[1.0,0.33,0.33]", "overwrite=true"], report=True))
    assert "resuming" not in capsys.readouterr().err
    records = read_trace(tmp_path / "o" / "trace.jsonl")
    assert [r["spacing"] for r in records if r.get("type") == "run"] == [[1.0, 0.33, 0.33]]
    assert records[0]["spacing_from"] == "argument" and records[0]["resumed"] is False
    assert second["spacing from"] == "argument"
    report = (tmp_path / "o" / "report.html").read_text()
    assert "spacing from" in report and "[1.0, 0.33, 0.33]" in report
