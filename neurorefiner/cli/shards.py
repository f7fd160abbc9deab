"""Write TopoRefineNet training samples to disk shards once (in parallel), so training only reads them."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, parse_shape, writes


@friendly_errors
@writes(out="folder")
def make_shards(out: Path = typer.Option(..., "--out", help="shard folder (e.g. data/cache/shards/stage1/train)"),
                stage: int = typer.Option(1, help="1: synthetic defects in gold; 2: the segmenters' own errors"),
                dataset: list[str] = typer.Option(["diadem"], "--dataset", help="registry name (repeat for more)"),
                part: str = typer.Option("train", help="train | val: the training cases or the held-out ones"),
                segmenter: list[str] = typer.Option(["unet3d", "nnunet_style"], "--segmenter",
                                                    help="stage 2: whose initial masks (repeat)"),
                init_masks_root: Path | None = typer.Option(None, "--init-masks-root",
                                                            help="default data/cache/init_masks"),
                n: int = typer.Option(4096, "--n", help="samples"),
                shard_size: int = typer.Option(256, "--shard-size", help="samples per shard"),
                crop: str = typer.Option("32,64,64", help="crop z,y,x"),
                workers: int = typer.Option(2, help="worker processes"),
                seed: int = typer.Option(0, help="seed"),
                ops: str = typer.Option("connect=0.4,remove=0.3,cut=0.3", help="operation shares"),
                variants: str = typer.Option("correct=0.6,wrong_place=0.2,opposite=0.2",
                                             help="variant shares (wrong_place / opposite: target = no change)"),
                distractor_prob: float = typer.Option(0.3, "--distractor-prob",
                                                      help="stage 1: share of crops with an unnamed second defect"),
                faint_gap: float = typer.Option(0.0, "--faint-gap",
                                                help="stage 1: share of breaks with the image made faint across "
                                                     "the gap, as segmenters break neurites"),
                faint_contrast: str = typer.Option("0.1,0.6", "--faint-contrast",
                                                   help="stage 1: the faint gap's contrast range low,high (share "
                                                        "of the neurite's contrast over the background)")
                ) -> None:
    """Write sample shards (see neurorefiner.data.sample_shards); an interrupted run continues, and a folder made
    with other settings is refused."""
    settings = check_options(stage, dataset, part, n, shard_size, workers, crop, ops, variants, distractor_prob,
                             seed, faint_gap, faint_contrast)
    from neurorefiner.data.shard_makers import make_shards as run

    manifest = run(out, stage, dataset, n, part, segmenter, str(init_masks_root) if init_masks_root else None,
                   settings, shard_size, workers)
    typer.echo(f"{manifest['n_samples']} samples in {len(manifest['shards'])} shards at {out} "
               f"({manifest['writer_version']}); {manifest['counts']}")


#: the sample settings' field names as the options that set them, for the messages
_FIELDS = {"op_shares": "--ops", "variant_shares": "--variants", "crop_size": "--crop", "seed": "--seed",
           "distractor_prob": "--distractor-prob", "faint_gap": "--faint-gap", "faint_contrast": "--faint-contrast"}


def check_options(stage: int, datasets: list[str], part: str, n: int, shard_size: int, workers: int, crop: str,
                  ops: str, variants: str, distractor_prob: float, seed: int, faint_gap: float,
                  faint_contrast: str):  # type: ignore[no-untyped-def]
    """Every option checked before any import or loading (a typo used to cost seconds of loading, then a
    traceback): one :class:`InputError` naming the option and what it accepts. Returns the sample settings."""
    from neurorefiner.data.registry import available
    from neurorefiner.data.shard_folder import PARTS, ShardSettings
    from neurorefiner.errors import InputError

    if stage not in (1, 2):
        raise InputError(f"--stage {stage}: choose 1 (synthetic defects in gold) or 2 (the segmenters' errors)")
    unknown = [d for d in datasets if d not in available()]
    if unknown:
        raise InputError(f"--dataset {unknown[0]}: no such dataset; choose from {', '.join(available())}")
    if part not in PARTS:
        raise InputError(f"--part {part}: choose {' or '.join(PARTS)} (test cases are never trained on)")
    for option, value in (("--n", n), ("--shard-size", shard_size), ("--workers", workers)):
        if value < 1:
            raise InputError(f"{option} {value}: must be a whole number >= 1")
    try:
        contrast = tuple(float(c) for c in faint_contrast.split(","))
    except ValueError:
        raise InputError(f"--faint-contrast must read low,high (two numbers in [0, 1]), got {faint_contrast!r}"
                         ) from None
    try:
        return ShardSettings(stage, parse_shape(crop, "--crop"), _shares(ops, "--ops"),
                             _shares(variants, "--variants"), distractor_prob, seed, faint_gap, contrast)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        message = str(exc)
        for name, option in _FIELDS.items():
            message = message.replace(name, option)
        raise InputError(message) from None


def _shares(text: str, option: str) -> dict:
    """``name=share,name=share`` -> a dict; anything else an :class:`InputError` naming ``option``."""
    from neurorefiner.errors import InputError

    try:
        return {k.strip(): float(v) for k, v in (p.split("=") for p in text.split(",") if p.strip())}
    except ValueError:
        raise InputError(f"{option} must read name=share,name=share, got {text!r}") from None
