"""``refine.py executor=dask`` on a 2-worker LocalCluster: the same refined mask as ``executor=local``, a killed
run that resumes to the same mask, and bad input refused with one line before any cluster starts.

The volume is a small SYNTHETIC stack (gold label with breaks cut and specks added), refined with the heuristic
agents and the scripted editor of test_refine_loop, so a run takes seconds; the cluster is started once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.io import read_swc, read_volume, write_volume
from neurorefiner.io.ome_zarr import open_ome_zarr, write_ome_zarr_volume
from tests.integration.test_refine_output_folder import one_error_line, refine_here

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (32, 128, 256)
FAKE = ["editor._target_=tests.integration.test_refine_loop.slow_editor", "+editor.delay=0", "loop.block_size=64",
        "agent=heuristic", "progress=false"]
DASK = ["executor=dask", "executor.chunks=[32,64,64]", "executor.halo=[0,64,64]", "executor.dashboard_address=null"]


@pytest.fixture(scope="module")
def volume(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The stack as TIFF and as OME-Zarr, and its in-memory refinement (executor=local)."""
    from neurorefiner.synth import render_volume
    from neurorefiner.synth.presets import preset_params

    tmp = tmp_path_factory.mktemp("whole_volume")
    image, label, _, spacing = render_volume(preset_params("synthetic_cwmbs_weak").replace(shape=SHAPE), 0)
    rng = np.random.default_rng(0)
    mask = label.copy()
    for z, y, x in np.argwhere(label)[rng.choice(int(label.sum()), size=6, replace=False)]:
        mask[max(z - 2, 0):z + 3, max(y - 3, 0):y + 4, max(x - 3, 0):x + 4] = False
    for _ in range(10):
        z, y, x = (int(rng.integers(2, s - 3)) for s in SHAPE)
        mask[z - 1:z + 2, y - 1:y + 2, x - 1:x + 2] = True
    paths = {"tif": (write_volume(tmp / "img.tif", image, spacing=spacing), write_volume(tmp / "msk.tif", mask,
                                                                                          spacing=spacing)),
             "zarr": (write_ome_zarr_volume(tmp / "img.ome.zarr", image, spacing, (32, 64, 64)),
                      write_ome_zarr_volume(tmp / "msk.ome.zarr", mask, spacing, (32, 64, 64)))}
    refine_here([*FAKE, f"image={paths['tif'][0]}", f"mask={paths['tif'][1]}", f"out={tmp / 'local'}",
                 "report=false", "~tracing"])
    local = read_volume(tmp / "local" / "refined_mask.tif").load() > 0
    assert (local != mask).sum() > 100  # the loop had real work
    return {"tmp": tmp, "paths": paths, "mask": mask, "local": local, "spacing": spacing}


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    import logging

    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as c:
        yield c.scheduler_address


def refined(out: Path) -> np.ndarray:
    return open_ome_zarr(out / "refined_mask.ome.zarr")[0][...] > 0


@pytest.mark.slow
@pytest.mark.parametrize("tile", ["[32,128,256]", "[32,64,64]"], ids=["one_tile", "eight_tiles"])
def test_dask_gives_the_in_memory_mask(volume: dict, cluster: str, tile: str) -> None:
    """One tile: voxel for voxel, by construction (same blocks, same normalisation, nothing held back). Eight
    tiles: the tiles' regions reach one block past their borders, so every block the in-memory run edits is
    seen with the same neighbourhood; what can still differ is bounded here: only voxels within reach of an
    edit whose block straddles a tile border (loop.halo + the editor's crop of a border), and none on this
    stack. Removals of pieces that continue past a region (the border guard) are left to the tile that
    holds them whole."""
    img, msk = volume["paths"]["zarr"]
    out = volume["tmp"] / f"dask_{len(tile)}_{tile.count('64')}"
    summary = refine_here([*FAKE, *DASK, f"image={img}", f"mask={msk}", f"out={out}", f"executor.tile={tile}",
                           f"executor.address={cluster}", "executor.components=true"])
    got, want = refined(out), volume["local"]
    from neurorefiner.topology.components import betti0

    assert (summary["components before"], summary["components after"]) == (betti0(volume["mask"]), betti0(want))
    differ = np.argwhere(got != want)
    if tile == "[32,128,256]":
        assert len(differ) == 0
    else:
        reach = 32 + 64   # loop.halo (default: half the editor's 64) + the editor's crop
        near = [min(min(y % 64, 64 - y % 64), min(x % 64, 64 - x % 64)) <= reach for _, y, x in differ]
        assert all(near) and len(differ) <= 0.05 * (want != volume["mask"]).sum(), len(differ)
        assert len(differ) == 0  # what this stack measures (the bound above is what the design promises)
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert summary["skipped tiles"] == 0   # every tile's region holds foreground here
    assert sum(r["type"] == "tile_done" for r in records) == summary["tiles"] and records[-1]["type"] == "done"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        ["overview.png", "refined_mask.ome.zarr", "refined_skeleton.swc", "skeletons", "trace.jsonl", "traces"]
    swc = [line for f in (out / "skeletons").iterdir() for line in f.read_text().splitlines() if line[:1].isdigit()]
    assert len(swc) > 10 and len(list((out / "traces").iterdir())) >= 1
    merged = read_swc(out / "refined_skeleton.swc")   # every tile's nodes, in one file that validates
    assert len(merged) == len(swc) and len(merged.roots()) == summary["skeleton pieces"]
    if summary["tiles"] > 1:   # a piece crossing a tile border is one piece in the merged file
        assert summary["skeleton border joins"] >= 1


@pytest.mark.slow
def test_a_killed_dask_run_resumes_to_the_same_mask(volume: dict, cluster: str, tmp_path: Path) -> None:
    """``refine.py`` killed (-9) once a tile is committed, on a cluster that lives on (a lab's); run again, it
    takes the committed tiles from the trace and ends with the mask an uninterrupted run gives."""
    img, msk = volume["paths"]["zarr"]
    out = tmp_path / "out"
    args = [sys.executable, str(ROOT / "refine.py"), *FAKE, *DASK, f"image={img}", f"mask={msk}", f"out={out}",
            "executor.tile=[32,64,128]", f"executor.address={cluster}", f"hydra.run.dir={tmp_path / 'run'}"]
    args, env = _kill_after_first_tile(args, out)   # the driver, mid-run
    committed = (out / "trace.jsonl").read_text().count('"type":"tile_done"')
    assert 1 <= committed < 4, committed
    assert not (out / "refined_mask.ome.zarr").exists()    # no half-written output in out/
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"{committed} already committed" in run.stderr
    np.testing.assert_array_equal(refined(out), volume["local"])


def test_bad_input_is_one_line_before_any_cluster(volume: dict, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    img, msk = volume["paths"]["zarr"]
    tif = volume["paths"]["tif"][1]
    with pytest.raises(SystemExit) as exc:
        refine_here([*FAKE, *DASK, f"image={img}", f"mask={tif}", f"out={tmp_path / 'a'}"])
    assert "msk.tif: executor=dask reads OME-Zarr" in one_error_line(capsys, 2, exc)
    other = write_ome_zarr_volume(tmp_path / "small.ome.zarr", volume["mask"][:16], volume["spacing"])
    with pytest.raises(SystemExit) as exc:
        refine_here([*FAKE, *DASK, f"image={img}", f"mask={other}", f"out={tmp_path / 'b'}"])
    assert "small.ome.zarr: mask shape (16, 128, 256) differs from image shape (32, 128, 256)" in \
        one_error_line(capsys, 2, exc)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def server_down_editor(**_: object):  # type: ignore[no-untyped-def]
    """An editor whose model server is gone (what a VLM role raises when vLLM stops answering)."""
    from neurorefiner.agents.vlm.client import AgentServerError

    class Down:
        def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
            raise AgentServerError("the agents' server at http://127.0.0.1:9/v1 did not answer")

    return Down()


@pytest.mark.slow
def test_a_server_down_ends_the_dask_run_with_one_line(volume: dict, cluster: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    """Every tile would fail the same way: the run stops asking, cancels the other tiles, and ends as the
    in-memory run does (one line, exit 2), saying how to resume; no output is left half-written."""
    img, msk = volume["paths"]["zarr"]
    out = tmp_path / "out"
    overrides = [a for a in FAKE if "editor" not in a]
    with pytest.raises(SystemExit) as exc:
        refine_here([*overrides, *DASK, "editor._target_=tests.integration.test_whole_volume_refine.server_down_editor",
                     f"image={img}", f"mask={msk}", f"out={out}", "executor.tile=[32,64,64]",
                     f"executor.address={cluster}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "did not answer" in err[-1] and "run again to resume" in err[-1], err
    assert not any("Traceback" in line for line in err) and not (out / "refined_mask.ome.zarr").exists()


def scheduled(out: Path) -> set[int]:
    """The tiles a run committed (refined or found empty), from its trace."""
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    return {int(r["tile"]) for r in records if r["type"] == "tile_done"}


@pytest.fixture(scope="module")
def corner(volume: dict) -> dict:
    """The stack's mask kept in its first 48 columns (x) only, as OME-Zarr, and its in-memory refinement. With
    tiles of 32 x 64 x 64 and a halo of 64 in y and x, the regions that reach it are those of the tiles in the
    first two columns of tiles: 4 of the 8."""
    tmp, spacing = volume["tmp"], volume["spacing"]
    mask = volume["mask"].copy()
    mask[:, :, 48:] = False
    zarr_path = write_ome_zarr_volume(tmp / "corner.ome.zarr", mask, spacing, (32, 64, 64))
    tif = write_volume(tmp / "corner.tif", mask, spacing=spacing)
    refine_here([*FAKE, f"image={volume['paths']['tif'][0]}", f"mask={tif}", f"out={tmp / 'corner_local'}",
                 "report=false", "~tracing"])
    local = read_volume(tmp / "corner_local" / "refined_mask.tif").load() > 0
    assert mask.any() and (local != mask).sum() > 0   # the loop had work in the corner
    return {"zarr": zarr_path, "mask": mask, "local": local}


CORNER_PLAN = ["executor.tile=[32,64,64]"]   # halo [0,64,64] (DASK)


def touching(mask: np.ndarray) -> set[int]:
    """The tiles of CORNER_PLAN whose region (tile + halo) holds foreground of ``mask``."""
    from neurorefiner.refine.whole_volume.tiles import plan_tiles

    return {t.id for t in plan_tiles(mask.shape, (32, 64, 64), (0, 64, 64), (1, 64, 64)) if mask[t.region].any()}


@pytest.mark.slow
def test_an_empty_mask_schedules_no_tile_and_writes_an_empty_store(volume: dict, cluster: str,
                                                                      tmp_path: Path) -> None:
    """Empty space is free: no tile is read or refined, and the output is still a whole, valid OME-Zarr of
    zeros (its chunks never written), with the tiles skipped counted in the summary and the trace header."""
    empty = write_ome_zarr_volume(tmp_path / "empty.ome.zarr", np.zeros(SHAPE, bool), volume["spacing"],
                                  (32, 64, 64))
    out = tmp_path / "out"
    summary = refine_here([*FAKE, *DASK, *CORNER_PLAN, f"image={volume['paths']['zarr'][0]}", f"mask={empty}",
                           f"out={out}", f"executor.address={cluster}"])
    assert (summary["tiles"], summary["skipped tiles"], summary["refined tiles"]) == (8, 8, 0)
    assert summary["voxels after"] == 0 and scheduled(out) == set()
    header = json.loads((out / "trace.jsonl").read_text().splitlines()[0])
    assert (header["tiles"], header["skipped tiles"]) == (8, 8)
    source, spacing = open_ome_zarr(out / "refined_mask.ome.zarr")
    assert source.shape == SHAPE and spacing == tuple(volume["spacing"]) and not source[...].any()
    assert not list((out / "traces").iterdir())   # no tile ran the loop
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader

    node = next(iter(Reader(parse_url(str(out / "refined_mask.ome.zarr")))()))   # napari-ome-zarr's reader
    assert len(node.data) >= 1 and not any(np.asarray(level).any() for level in node.data)


@pytest.mark.slow
def test_a_corner_mask_schedules_only_the_tiles_whose_halo_reaches_it(volume: dict, corner: dict, cluster: str,
                                                                      tmp_path: Path) -> None:
    """Only the tiles whose region holds foreground are refined; the others are skipped, and the refined mask
    is still the in-memory run's, voxel for voxel (a skipped tile's interior is empty in both)."""
    out = tmp_path / "out"
    summary = refine_here([*FAKE, *DASK, *CORNER_PLAN, f"image={volume['paths']['zarr'][0]}",
                           f"mask={corner['zarr']}", f"out={out}", f"executor.address={cluster}"])
    assert touching(corner["mask"]) == {0, 1, 4, 5}
    assert scheduled(out) == {0, 1, 4, 5} and (summary["tiles"], summary["skipped tiles"]) == (8, 4)
    np.testing.assert_array_equal(refined(out), corner["local"])


@pytest.mark.slow
def test_a_killed_run_with_skipped_tiles_resumes_to_the_same_mask(volume: dict, corner: dict, cluster: str,
                                                                  tmp_path: Path) -> None:
    """Killed once a tile is committed and run again, the run skips the same tiles, takes the committed ones
    from the trace, refines the rest and ends with the in-memory mask."""
    img = volume["paths"]["zarr"][0]
    out = tmp_path / "out"
    args = [sys.executable, str(ROOT / "refine.py"), *FAKE, *DASK, *CORNER_PLAN, f"image={img}",
            f"mask={corner['zarr']}", f"out={out}", f"executor.address={cluster}", f"hydra.run.dir={tmp_path / 'run'}"]
    args, env = _kill_after_first_tile(args, out)   # the driver, mid-run
    committed = scheduled(out)
    assert 1 <= len(committed) < 4 and committed <= {0, 1, 4, 5}, committed
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"8 tile(s) of [32, 64, 64] voxels (halo [0, 64, 64]), 4 skipped (no foreground within their halo), " \
           f"{len(committed)} already committed; {4 - len(committed)} to refine" in run.stderr, run.stderr[-2000:]
    assert scheduled(out) == {0, 1, 4, 5}
    np.testing.assert_array_equal(refined(out), corner["local"])


def _kill_after_first_tile(args: list[str], out: Path) -> tuple[list[str], dict]:
    """Start the run (each editor call slowed a little) and kill its driver as soon as one tile is committed: a run
    stopped mid-way. Returns the command line and environment it ran with, for the run that resumes it."""
    env = {**os.environ, "WANDB_MODE": "offline", "PROJECT_ROOT": str(ROOT)}
    args = [a.replace("+editor.delay=0", "+editor.delay=0.1") for a in args]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    trace = out / "trace.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if trace.exists() and trace.read_text().count('"type":"tile_done"') >= 1:
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return args, env
