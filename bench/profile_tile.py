"""Where one tile's time goes: ``refine.py`` (executor=local, the loop a Dask task runs on its region) on one
image and mask under cProfile, for one agent set, with a table of the parts that matter (loop, editor, Inspector,
candidate search, trace writes, Advisor). docs/whole_volume.md ("Where the time goes") was made with it:

    WANDB_MODE=offline .venv/bin/python -m bench.profile_tile IMAGE.tif MASK.tif --agent learned
    WANDB_MODE=offline .venv/bin/python -m bench.profile_tile IMAGE.tif MASK.tif --agent heuristic

on SYNTHETIC synthetic_zbfwb val_000 and its cached U-Net mask (data/cache/synth/synthetic_zbfwb/val/...
_image.tif, data/cache/init_masks/synthetic_zbfwb/unet3d/...tif). ``--stats FILE`` keeps the raw profile.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import tempfile
import time
from pathlib import Path

import typer

PARTS = {  # label -> (file suffix, function) in the profile
    "loop": ("agents/loop.py", "run_loop"),
    "editor": ("agents/editor.py", "run_editor"),
    "Inspector": ("agents/loop.py", "_inspect"),
    "find_candidates": ("agents/candidates.py", "find_candidates"),
    "removals' features": ("agents/candidates.py", "_removals"),
    "distance to the tree": ("agents/candidates.py", "dist_to_main"),
    "heuristic find_defects": ("heuristic/detect.py", "find_defects"),
    "trace writes": ("agents/trace.py", "write"),
    "Advisor": ("advisor.py", "advise"),
}


def parts(stats: pstats.Stats) -> dict[str, tuple[float, int]]:
    """(cumulative seconds, calls) of each of :data:`PARTS` found in the profile (the outermost where several
    functions match, e.g. an Advisor that wraps another)."""
    out: dict[str, tuple[float, int]] = {}
    for label, (suffix, name) in PARTS.items():
        for (path, _, fn), (_, calls, _, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            if fn == name and path.endswith(suffix) and cumulative > out.get(label, (-1.0, 0))[0]:
                out[label] = (cumulative, calls)
    return out


def main(image: Path, mask: Path, agent: str = typer.Option("learned", help="agent= of refine.py"),
         stats_out: Path | None = typer.Option(None, "--stats", help="write the raw cProfile stats here"),
         top: int = typer.Option(25, help="also print this many functions by cumulative time")) -> None:
    """Refine IMAGE with MASK in memory under cProfile and print where the loop's time went."""
    import torch
    from hydra import compose, initialize_config_dir

    from neurorefiner.paths import project_root
    from neurorefiner.refine.entry import run

    torch.set_num_threads(1)   # as a Dask worker of one thread runs a tile
    out = Path(tempfile.mkdtemp(prefix="profile_tile_"))
    with initialize_config_dir(version_base="1.3", config_dir=str(project_root() / "conf")):
        cfg = compose(config_name="refine", overrides=[
            f"agent={agent}", f"image={image}", f"mask={mask}", f"out={out / 'out'}", "progress=false",
            "report=false", "~tracing", "paths.output_dir=/tmp/nr-unused"])
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    summary = run(cfg)
    profile.disable()
    shutil.rmtree(out, ignore_errors=True)
    print(f"agent={agent}: {time.perf_counter() - t0:.1f} s, {summary.get('accepted')} accepted, "
          f"{summary.get('rejected')} rejected, {summary.get('escalated')} escalated")
    stats = pstats.Stats(profile)
    if stats_out is not None:
        stats.dump_stats(stats_out)
    found = parts(stats)
    loop = found.get("loop", (0.0, 0))[0] or 1.0
    for label, (seconds, calls) in found.items():
        print(f"  {label:24s} {seconds:7.2f} s  {100 * seconds / loop:5.1f} % of the loop  ({calls} calls)")
    stats.sort_stats("cumulative").print_stats(top)


if __name__ == "__main__":
    typer.run(main)
