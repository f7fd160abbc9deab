"""Train the judge of the learned agents on gold (candidates of a segmenter's masks labelled from the gold
SWC), and write it with its card: from one dataset's masks (JSON, hand features), or from every mined dataset
(``--table``: candidates mined by ``neurorefiner make judge-candidates``, models that may read the image crops)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


def parse_models(text: str) -> dict[str, str]:
    """``join=crop_net,remove=lgbm`` -> per-kind model types (kinds not named: crop_lgbm)."""
    from neurorefiner.agents.candidates import KINDS
    from neurorefiner.errors import InputError

    models = dict.fromkeys(KINDS, "crop_lgbm")
    for part in (p for p in text.split(",") if p.strip()):
        kind, _, model = part.partition("=")
        if kind.strip() not in KINDS or model.strip() not in ("logistic", "lgbm", "crop_lgbm", "crop_net"):
            raise InputError(f"--models: {part!r} is not kind=model (kinds {KINDS}; models logistic, lgbm, "
                             "crop_lgbm, crop_net)")
        models[kind.strip()] = model.strip()
    return models


@friendly_errors
@writes(out="file")
def train_judge(dataset: str = typer.Option("diadem", "--dataset", help="registry name with gold SWCs"),
                split: str = typer.Option("dev", "--split",
                                          help="the split(s) to learn from, comma-separated (never a test split)"),
                segmenters: str = typer.Option("unet3d,nnunet_style", "--segmenters",
                                               help="comma-separated: whose masks' candidates to learn from"),
                out: Path = typer.Option(Path("outputs/judge/judge.json"), "--out",
                                         help="where to write the judge (checkpoints/judge.json ships it)"),
                augment: int = typer.Option(2, "--augment", help="defect-cut copies of each mask"),
                min_support: int = typer.Option(1, "--min-support", min=1,
                                                help="candidates a threshold must admit before its out-of-fold "
                                                     "precision is held to the floor (few stacks: 10)"),
                join_piece: float | None = typer.Option(None, "--join-piece", min=0.0, max=1.0,
                                                        help="a join is labelled right only if this share of the "
                                                             "piece it attaches lies on the gold (default: the gap "
                                                             "alone decides)"),
                tree_root: str = typer.Option("largest", "--tree-root",
                                              help="the piece the candidates grow: largest, or gold (the piece at "
                                                   "the gold's root, as in runs told the soma: evaluate.py "
                                                   "tree_root=gold, refine.py tracing.marker)"),
                reach_um: float | None = typer.Option(None, "--reach-um", min=0.1,
                                                      help="the longest join looked for, um (default 8; match the "
                                                           "runs' agent.inspector.reach_um)"),
                table: Path | None = typer.Option(None, "--table",
                                                  help="mined candidates (neurorefiner make judge-candidates): train "
                                                       "one judge on every dataset there instead (--dataset etc. "
                                                       "unused)"),
                models: str = typer.Option("join=crop_net", "--models",
                                           help="with --table: kind=model per kind (logistic, lgbm, crop_lgbm, "
                                                "crop_net; unnamed kinds: crop_lgbm)"),
                epochs: int = typer.Option(12, "--epochs", min=1, help="with --table: the network's epochs")) -> None:
    """Train the learned agents' judge on gold."""
    if table is not None:
        from neurorefiner.adaptation.judge.table_training import train_table_judge

        command = f"neurorefiner train-judge --table {table} --models {models} --out {out}" + (
            f" --epochs {epochs}" if epochs != 12 else "")
        path, card = train_table_judge(table, out, parse_models(models), epochs, command)
        typer.echo(f"judge -> {path}\ncard  -> {card}")
        return
    from neurorefiner.adaptation.judge.training import train_judge as run

    path, card = run(dataset, split, [s for s in segmenters.split(",") if s], str(out), augment, progress=is_tty(),
                      min_support=min_support, join_piece=join_piece, tree_root=tree_root,
                      reach_um=reach_um)
    typer.echo(f"judge -> {path}\ncard  -> {card}")
