"""Generate a synthetic fluorescence neuron benchmark (images, labels, gold SWC) from a preset.

Writes ``<preset>_<k>_image.tif``, ``<preset>_<k>_label.tif`` (ImageJ TIFFs with the voxel size) and
``<preset>_<k>_gold.swc`` per volume, volume k rendered with seed S + k, and a ``manifest.json``.
The data are SYNTHETIC: never report them as BigNeuron, CWMBS or ZBFWB results.
"""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, parse_shape, parse_spacing, writes


@friendly_errors
@writes(out="folder")
def synth(preset: str = typer.Argument(..., help="preset name, e.g. tiny, synthetic_cwmbs_weak"),
          out: Path = typer.Option(..., "--out", help="output folder"),
          n: int = typer.Option(4, "--n", help="number of volumes"),
          seed: int = typer.Option(0, "--seed", help="random seed (volume k uses seed + k)"),
          shape: str = typer.Option(None, "--shape", help="field Z,Y,X in voxels (default: the preset's)"),
          swc: Path = typer.Option(None, "--swc", help="render this SWC as the target instead of drawn trees"),
          swc_spacing: str = typer.Option(None, "--swc-spacing", help="voxel size z,y,x um of --swc "
                                          "(default: the preset's)")) -> None:
    import json

    from tqdm import tqdm

    from neurorefiner.errors import InputError
    from neurorefiner.io import read_swc, write_swc, write_volume
    from neurorefiner.io.atomic import atomic_path
    from neurorefiner.synth.params import GENERATOR_VERSION
    from neurorefiner.synth.presets import preset_params
    from neurorefiner.synth.render import check_seed, render

    params = preset_params(preset)
    if n <= 0:
        raise InputError(f"--n must be a positive number of volumes, got {n}")
    check_seed(seed)
    size = parse_shape(shape)
    if size is not None:
        params = params.replace(shape=size)
    tree = read_swc(swc) if swc is not None else None
    tree_spacing = parse_spacing(swc_spacing) or params.spacing
    check_folder(out, {"preset": preset, "seed": seed, "n": n, "params": params.to_dict(),
                       "source_swc": None if swc is None else str(swc)})
    out.mkdir(parents=True, exist_ok=True)
    volumes = []
    for k in tqdm(range(n), desc=f"synthesising {preset}", unit="vol"):
        r = render(params, seed + k, tree=tree, tree_spacing=tree_spacing if tree is not None else None)
        name = f"{preset}_{k:03d}"
        write_volume(out / f"{name}_image.tif", r.image, r.spacing)
        write_volume(out / f"{name}_label.tif", r.label, r.spacing)
        write_swc(out / f"{name}_gold.swc", r.gold)
        volumes.append({"name": name, "image": f"{name}_image.tif", "label": f"{name}_label.tif",
                        "gold": f"{name}_gold.swc", **{k2: v for k2, v in r.info.items() if k2 != "draw"},
                        "draw": r.info["draw"]})
    manifest = {"synthetic": True, "note": "SYNTHETIC data from neurorefiner.synth; not real recordings",
                "generator_version": GENERATOR_VERSION, "preset": preset, "seed": seed,
                "params": params.to_dict(), "spacing_zyx_um": list(params.spacing),
                "source_swc": None if swc is None else str(swc), "volumes": volumes}
    with atomic_path(out / "manifest.json") as tmp:
        tmp.write_text(json.dumps(manifest, indent=1, default=float))
    typer.echo(f"wrote {n} synthetic volume(s) of {preset} {params.shape} at {params.spacing} um to {out}")


#: what a finished folder's manifest records of the run that made it, as the option that sets each
_RECORDED = {"preset": "PRESET", "seed": "--seed", "n": "--n", "params": "--shape / the preset's parameters",
             "source_swc": "--swc"}


def check_folder(out: Path, wanted: dict) -> None:
    """Refuse ``out`` when it holds another run's volumes: a manifest of other settings, or files this run would
    not write (it used to write over them and leave the rest, so the folder mixed two runs under one manifest).
    The same run again, or one that was interrupted (its files, no manifest yet), may write there."""
    import json

    from neurorefiner.errors import InputError

    manifest = out / "manifest.json"
    if manifest.is_file():
        try:
            made = json.loads(manifest.read_text())
            made = {**made, "n": len(made.get("volumes", []))}
        except (OSError, ValueError, AttributeError):
            made = {}
        plain = json.loads(json.dumps(wanted, default=float))  # as the manifest holds it (tuples as lists)
        changed = [f"{option} differ" if k == "params" else f"{option} {plain[k]} (the folder's: {made.get(k)})"
                   for k, option in _RECORDED.items() if plain[k] != made.get(k)]
        if changed:
            raise InputError(f"holds the volumes of another synth run ({'; '.join(changed)}); choose another --out "
                             "or delete the folder", out)
        return
    ours = {f"{wanted['preset']}_{k:03d}_{part}" for k in range(wanted["n"])
            for part in ("image.tif", "label.tif", "gold.swc")}
    others = sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(".")) \
        if out.is_dir() else []
    if others:
        raise InputError(f"holds files this run would not write ({', '.join(others[:3])}"
                         f"{', ...' if len(others) > 3 else ''}) and no manifest.json; choose another --out", out)
