"""``python train.py task=segment model=unet3d dataset=diadem``: train a baseline segmenter.

Reads ``cfg.model`` (a ``_target_`` segmenter), ``cfg.dataset`` (a ``_target_`` dataset), ``cfg.trainer``
(a ``lightning.Trainer`` node), ``cfg.logger`` and ``cfg.segmentation`` (data and optimiser settings,
``conf/segmentation/default.yaml``). Checkpoints go to ``cfg.segmentation.ckpt_dir``; a run that finds a
``last.ckpt`` there resumes from it. At the end the best checkpoint (by validation Dice on held-out dev
volumes, or by their APP2 F1 with ``segmentation.pick: trace``) is exported as a compact ``.pt`` for
inference. Returns the final metrics.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.io.checkpoints import load_checkpoint
from neurorefiner.training.loggers import build_loggers
from neurorefiner.training.run_settings import resume_point, without
from neurorefiner.training.shipping import check_destination, ship, with_cards


def _instantiate_dataset(node: DictConfig):  # type: ignore[no-untyped-def]
    from hydra.utils import instantiate

    return instantiate(node)


def build_datamodule(cfg: DictConfig, dataset=None):  # type: ignore[no-untyped-def]
    from neurorefiner.data.datamodules.segmentation import SegmentationDataModule

    data = OmegaConf.to_container(cfg.segmentation.data, resolve=True)
    return SegmentationDataModule(dataset if dataset is not None else _instantiate_dataset(cfg.dataset),
                                  **data)  # type: ignore[arg-type]


def training_spacing(dm) -> tuple[float, float, float] | None:  # type: ignore[no-untyped-def]
    """Voxel spacing (z, y, x um) of the datamodule's first training case; None when the dataset has none."""
    train, _ = dm.split_cases()
    spacing = getattr(train[0], "spacing", None)
    return tuple(float(s) for s in spacing) if spacing else None  # type: ignore[return-value]


def build_module(cfg: DictConfig, data_spacing: tuple[float, float, float] | None = None):  # type: ignore[no-untyped-def]
    """The LightningModule around ``cfg.model``. A model config with ``spacing: null`` (nnU-Net-style, whose
    topology is planned from the voxel spacing) gets ``data_spacing``, the training data's, so the plan follows
    the dataset instead of DIADEM's spacing; the resolved value is what the exported checkpoint records."""
    from hydra.utils import instantiate

    from neurorefiner.data.transforms import DEFAULT_PERCENTILES, normalization_spec
    from neurorefiner.models.segmentation_module import SegmentationModule

    model_cfg = cfg.model
    if "spacing" in model_cfg and model_cfg.spacing is None:
        if data_spacing is None:
            raise ValueError(f"model {model_cfg.get('_target_')} plans from the voxel spacing: set model.spacing "
                             "or train on a dataset whose cases carry one")
        model_cfg = OmegaConf.merge(model_cfg, {"spacing": list(data_spacing)})
    net_config = OmegaConf.to_container(model_cfg, resolve=True)
    net = instantiate(model_cfg)
    seg = cfg.segmentation
    optimizer = instantiate(seg.optimizer) if seg.get("optimizer") else None
    data = seg.data
    percentiles = data.get("normalization", DEFAULT_PERCENTILES)  # null in the config: min-max
    norm = normalization_spec(None if percentiles is None else tuple(percentiles))
    return SegmentationModule(net, net_config=net_config, optimizer=optimizer, patch_size=tuple(data.patch_size),
                              normalization=norm, **OmegaConf.to_container(seg.module))


PICKS = {"dice": "val/dice", "trace": "val/trace_f1"}


def pick_metric(seg: DictConfig) -> str:
    """What chooses the exported checkpoint: ``segmentation.pick`` 'dice' (validation Dice, the default and
    every DIADEM recipe) or 'trace' (validation APP2 F1 from the gold root, which needs
    ``segmentation.module.trace_val: true``)."""
    pick = str(seg.get("pick", "dice"))
    if pick not in PICKS:
        raise ValueError(f"segmentation.pick must be one of {sorted(PICKS)}, got {pick!r}")
    if pick == "trace" and not seg.module.get("trace_val", False):
        raise ValueError("segmentation.pick=trace needs segmentation.module.trace_val=true (validation traces)")
    return PICKS[pick]


def segmenter_settings(cfg: DictConfig) -> dict[str, Any]:
    """What shapes a segmenter's weights, for :func:`resume_point`: data, network, loss, optimiser, seed; not the
    budget, the folders or the loader's workers."""
    seg = OmegaConf.to_container(cfg.segmentation, resolve=True)
    keep = {k: seg.get(k) for k in ("data", "module", "optimizer")}
    return {**without(keep, {"num_workers", "keyed_sampling"}),
            "model": OmegaConf.to_container(cfg.model, resolve=True),
            "dataset": OmegaConf.to_container(cfg.dataset, resolve=True), "seed": cfg.get("seed")}


def train_segmenter(cfg: DictConfig) -> dict[str, Any]:
    """Train, resume if interrupted, export the best weights; returns the final metrics dict."""
    import lightning as L
    import torch
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import ModelCheckpoint

    from neurorefiner.inference.segmenter import export_segmenter

    seg = cfg.segmentation
    # export_checkpoint=last: the end of the schedule, not the validation pick (cross-validation folds score
    # their held-out cases afterwards, so those cases must not also choose the checkpoint)
    export_which = str(seg.get("export_checkpoint", "best"))
    if export_which not in ("best", "last"):
        raise ValueError(f"segmentation.export_checkpoint must be 'best' or 'last', got {export_which!r}")
    L.seed_everything(int(cfg.get("seed", 0)), workers=True)
    if seg.get("num_threads"):
        torch.set_num_threads(int(seg.num_threads))
    dm = build_datamodule(cfg)
    module = build_module(cfg, training_spacing(dm))
    if seg.get("ckpt_dir"):
        ckpt_dir = Path(seg.ckpt_dir)
    else:
        arch = getattr(module.net, "arch", type(module.net).__name__.lower())
        ckpt_dir = Path(cfg.paths.checkpoint_dir) / "runs" / "segment" / arch / str(cfg.dataset.get("name", "data"))
    export = Path(seg.export_path) if seg.get("export_path") else ckpt_dir / "segmenter.pt"
    check_destination(cfg, export, export.with_suffix(".md"))  # never a shipped file; ship=true copies it
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    # two callbacks: the best by validation Dice (what is exported), and the latest state every epoch
    # (what an interrupted run resumes from; a monitored callback's save_last only follows improvements)
    monitor = pick_metric(seg)
    checkpoint = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor=monitor, mode="max",
                                 save_top_k=1, enable_version_counter=False)
    latest = ModelCheckpoint(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
                             save_on_train_epoch_end=True, enable_version_counter=False)
    snapshots = snapshot_callback(seg, ckpt_dir)
    from neurorefiner.training.distributed import check_launch, config_callbacks

    check_launch(cfg)
    trainer = instantiate(cfg.trainer, callbacks=[*config_callbacks(cfg), checkpoint, latest,
                                                   *([snapshots] if snapshots else [])],
                          logger=build_loggers(cfg) or False)
    last = ckpt_dir / "last.ckpt"
    resume = resume_point(ckpt_dir, segmenter_settings(cfg), bool(seg.get("resume", True)))
    if resume:  # a last.ckpt from elsewhere must not run code: refused here with a clear line, and
        load_checkpoint(resume, "checkpoint to resume from")  # Lightning below reads it weights-only too
    started = time.perf_counter()
    # weights_only explicitly: PyTorch's default (and TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1) would unpickle anything
    trainer.fit(module, datamodule=dm, ckpt_path=resume, weights_only=True)
    wall = time.perf_counter() - started
    metrics: dict[str, Any] = {k: float(v) for k, v in trainer.callback_metrics.items()
                               if getattr(v, "numel", lambda: 1)() == 1}
    best = checkpoint.best_model_path if export_which == "best" else ""
    best = best or (str(last) if last.exists() else "")
    if best:
        state = load_checkpoint(best, "training checkpoint")["state_dict"]
        module.load_state_dict(state)
        best_score = float(checkpoint.best_model_score) if checkpoint.best_model_score is not None else float("nan")
        metrics["best_val_trace_f1" if monitor == "val/trace_f1" else "best_val_dice"] = best_score
        metrics["val/pick"] = best_score  # the score that picked the checkpoint: what a sweep ranks
    on_gpu = torch.cuda.is_available() and str(cfg.trainer.get("accelerator", "cpu")) in ("gpu", "cuda", "auto")
    device = str(torch.cuda.get_device_name(0)) if on_gpu else f"CPU, torch threads: {torch.get_num_threads()}"
    info = {"wall_s": wall, "resumed_from": resume, "device": device, "global_step": int(trainer.global_step),
            "epochs": int(trainer.current_epoch), "dataset": str(cfg.dataset.get("name", "")),
            "train_cases": [c.name for c in dm.train_cases], "val_cases": [c.name for c in dm.val_cases],
            "best_checkpoint": best, "exported": export_which, "metrics": metrics, "seed": cfg.get("seed"),
            "foreground_prior": module.hparams.get("foreground_prior"), "picked_by": monitor}
    info["labels"] = {k: dm.__dict__.get(k) for k in ("labels", "label_band", "label_rel")}
    info["val_max_size"] = list(dm.val_max_size) if dm.val_max_size else None
    info["world_size"] = int(trainer.world_size)
    metrics.update({"wall_s": wall, "global_step": float(trainer.global_step), "export_path": str(export)})
    if trainer.is_global_zero:  # one writer: the export, its card and the shipping copy come from rank 0 only
        export_segmenter(module.net, module.hparams.net_config, export, tuple(seg.data.patch_size), meta=info,
                         normalization=module.hparams.get("normalization"))
        if snapshots:
            export_snapshots(module, ckpt_dir, tuple(seg.data.patch_size), info)
        ship(cfg, with_cards(export))
    return metrics


SNAPSHOT_DIR = "snapshots"


def snapshot_callback(seg: DictConfig, ckpt_dir: Path):  # type: ignore[no-untyped-def]
    """Keep the weights every ``segmentation.snapshot_every_n_epochs`` epochs (None: no snapshots). Why: the
    pick during training scores label-centred val crops, and on the SYNTHETIC stand-ins a crop's best checkpoint
    traced the whole val volumes far worse than an earlier one (0.54 vs 0.87 root-seeded F1 on cwmbs_weak);
    ``neurorefiner make postprocess`` with the snapshots as candidates chooses the checkpoint and its
    threshold together on the whole val volumes, the way the tables trace them."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    every = seg.get("snapshot_every_n_epochs")
    if not every:
        return None
    if int(every) < 1:
        raise InputError(f"segmentation.snapshot_every_n_epochs must be a whole number >= 1, got {every!r}")

    class SnapshotCheckpoint(ModelCheckpoint):
        """Its own state key: Lightning refuses two checkpoint callbacks alike (the every-epoch last.ckpt)."""

        @property
        def state_key(self) -> str:
            return self._generate_state_key(role="snapshots", every_n_epochs=int(every))

    return SnapshotCheckpoint(dirpath=Path(ckpt_dir) / SNAPSHOT_DIR, filename="step{step:06d}", monitor=None,
                              save_top_k=-1, every_n_epochs=int(every), save_on_train_epoch_end=True,
                              auto_insert_metric_name=False, enable_version_counter=False)


def export_snapshots(module, ckpt_dir: Path, patch_size: tuple[int, ...], info: dict[str, Any]) -> list[Path]:  # type: ignore[no-untyped-def]
    """Export every Lightning snapshot under ``<ckpt_dir>/snapshots/`` as an inference ``.pt`` beside it (what
    the chooser, ``init-masks`` and ``ship`` read), each with the run's metadata and its own step count. The
    module's weights are restored afterwards."""
    import copy

    from neurorefiner.inference.segmenter import export_segmenter

    kept = copy.deepcopy(module.state_dict())
    out = []
    for ckpt in sorted((Path(ckpt_dir) / SNAPSHOT_DIR).glob("step*.ckpt")):
        state = load_checkpoint(ckpt, "training snapshot")
        module.load_state_dict(state["state_dict"])
        # the run's validation figures stay in the metadata, but they are the whole run's, not the snapshot's
        meta = dict(info, global_step=int(state.get("global_step", 0)), epochs=int(state.get("epoch", 0)) + 1,
                    snapshot_of={"global_step": info.get("global_step"), "epochs": info.get("epochs")},
                    exported="snapshot", best_checkpoint=str(ckpt))
        out.append(export_segmenter(module.net, module.hparams.net_config, ckpt.with_suffix(".pt"), patch_size,
                                    meta=meta, normalization=module.hparams.get("normalization")))
    module.load_state_dict(kept)
    return out


def _validation_phrase(meta: dict) -> str:
    val = meta.get("val_cases")
    if not val:
        return "no validation case (the last checkpoint is exported)"
    if meta.get("exported") == "snapshot":
        return f"validated on {val} (reported only: a snapshot, chosen afterwards on the whole val volumes)"
    if meta.get("exported") == "last":
        return f"validated on {val} (reported only: the last checkpoint is exported)"
    return f"validated (and the checkpoint picked) on {val}"


def provenance_markdown(export_path: str | Path, command: str, title: str | None = None) -> str:
    """The ``.md`` shipped beside a checkpoint: how it was made and what it scored on validation, all read
    from the checkpoint's own metadata (nothing typed in)."""
    import hashlib

    from neurorefiner.inference.segmenter import load_segmenter

    path = Path(export_path)
    seg = load_segmenter(path)
    meta = seg.meta
    n_params = sum(p.numel() for p in seg.net.parameters())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    arguments = ({"members": f"{len(meta['members'])} x {seg.net_config['members'][0].get('_target_')}"}
                 if meta.get("members") else {k: v for k, v in seg.net_config.items() if k != "_target_"})
    lines = [f"# {title or path.name}", "",
             f"- file: `{path.name}` ({path.stat().st_size / 1e6:.2f} MB, sha256 {digest}...)",
             f"- network: `{seg.net_config.get('_target_')}` ({n_params:,} parameters), arguments `{arguments}`",
             f"- training patch (z, y, x): {list(seg.patch_size)}",
             f"- input normalisation: {seg.normalization and f'percentiles {list(seg.normalization)}' or 'min-max'}",
             f"- post-processing recorded for inference: {meta.get('postprocess') or 'none (threshold 0.5)'}"
             + (f", chosen on {meta['postprocess_chosen_on']}" if meta.get("postprocess_chosen_on") else "")]
    if meta.get("members"):
        lines.append(f"- an average of {len(meta['members'])} networks trained alike "
                     "(`neurorefiner.inference.ensemble`); each member:")
        for i, member in enumerate(meta["members"]):
            lines.append(f"  - member {i} (`{member.get('path')}`, seed {member.get('seed', 'not recorded')}):")
            lines += ["    " + line for line in _training_lines(member)]
    else:
        lines += _training_lines(meta)
    lines += ["", "## Command", "", "```bash", command.strip(), "```", ""]
    return "\n".join(lines)


def _val_crop(meta: dict) -> str:
    """How the validation volumes were cut: a pick on crops can score far above the whole volumes the tables
    trace (a root at the field border lies outside a crop centred on the label)."""
    crop = meta.get("val_max_size")
    return f", val volumes centre-cropped on their label to at most {' x '.join(map(str, crop))}" if crop else ""


def _training_lines(meta: dict) -> list[str]:
    """How one network was trained, from its checkpoint's metadata."""
    metrics = meta.get("metrics", {})
    return [f"- data: dataset `{meta.get('dataset')}`, trained on {meta.get('train_cases')}, "
            + _validation_phrase(meta) + "; no test case was used",
            f"- steps: {meta.get('global_step')} optimiser steps"
            + (f" (a snapshot of a {meta['snapshot_of'].get('global_step')}-step run)" if meta.get("snapshot_of")
               else "") + f", {meta.get('epochs')} epochs"
            + (f" (resumed from `{Path(meta['resumed_from']).name}`)" if meta.get("resumed_from") else ""),
            f"- wall time of the last `fit` call: {meta.get('wall_s', float('nan')):.0f} s"
            + (f" on {meta['device']}" if meta.get("device") else ""),
            f"- training labels: {meta.get('labels') or 'gold (case.label)'}",
            *([f"- output layer started at foreground probability {meta['foreground_prior']:g} "
               "(`neurorefiner.models.segmenters.output_prior`)"] if meta.get("foreground_prior") else []),
            (f"- validation (sliding window, threshold 0.5): Dice {metrics.get('val/dice', float('nan')):.4f}, "
             f"clDice {metrics.get('val/cldice', float('nan')):.4f}"
             + (f"; best validation Dice {metrics['best_val_dice']:.4f}" if "best_val_dice" in metrics
                else " (the last validation)") if meta.get("val_cases") else
             "- validation: none (every dev case trained the network)"),
            *([f"- checkpoint picked by validation APP2 F1 from the gold root (threshold 0.5{_val_crop(meta)}): best "
               f"{metrics.get('best_val_trace_f1', float('nan')):.4f}"] if meta.get("picked_by") == "val/trace_f1"
              else [])]
