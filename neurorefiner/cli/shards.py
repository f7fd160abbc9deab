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
    """Write sample shards (see neurorefiner.data.sample_shards); an interrupted run continues."""
    from neurorefiner.data.sample_shards import ShardSettings
    from neurorefiner.data.shard_makers import make_shards as run
    from neurorefiner.errors import InputError

    def shares(text: str, option: str) -> dict:
        try:
            return {k.strip(): float(v) for k, v in (p.split("=") for p in text.split(",") if p.strip())}
        except ValueError:
            raise InputError(f"{option} must read name=share,name=share, got {text!r}", option) from None

    try:
        contrast = tuple(float(c) for c in faint_contrast.split(","))
        settings = ShardSettings(stage, parse_shape(crop, "--crop"), shares(ops, "--ops"),
                                 shares(variants, "--variants"), distractor_prob, seed, faint_gap, contrast)
    except ValueError as exc:
        raise InputError(str(exc), "settings") from None
    manifest = run(out, stage, dataset, n, part, segmenter, str(init_masks_root) if init_masks_root else None,
                   settings, shard_size, workers)
    typer.echo(f"{manifest['n_samples']} samples in {len(manifest['shards'])} shards at {out} "
               f"({manifest['writer_version']}); {manifest['counts']}")
