"""``train_refiner(cfg)``: one TopoRefineNet training stage from a composed Hydra config.

``python train.py +stage=1`` trains on synthetic defects (stage 1); ``+stage=2`` continues from the
stage-1 checkpoint on defects mined from the baseline segmenters (stage 2). The stage's own settings
(datamodule, max_steps, lr, init_from) are read from ``cfg.stages[str(cfg.stage)]``; model, text
encoder, trainer and loggers come from their config groups. Everything is built with
``hydra.utils.instantiate``; this function only wires the pieces and writes
``<checkpoint_dir>/toporefinenet_stage{N}.ckpt`` (weights only, small) plus a metrics JSON beside it, under
``outputs/`` by default; ``ship=true`` copies them into ``checkpoints/`` (:mod:`neurorefiner.training.shipping`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.io.checkpoints import load_checkpoint
from neurorefiner.training.loggers import build_loggers
from neurorefiner.training.run_settings import resume_point, without
from neurorefiner.training.shipping import check_destination, ship, with_cards


def checkpoint_name(stage: int | str) -> str:
    """The file a stage writes unless its node names one (``stages.<n>.checkpoint_name``: the shipped
    two-stage editor is ``toporefinenet.ckpt``, what the editor loads by default)."""
    return f"toporefinenet_stage{stage}.ckpt"


def output_checkpoint(cfg: DictConfig) -> Path:
    """Where ``train_refiner`` writes the stage's checkpoint: ``paths.checkpoint_dir`` / the stage node's
    ``checkpoint_name`` or :func:`checkpoint_name`."""
    stage, node = _stage_node(cfg)
    return Path(str(cfg.paths.checkpoint_dir)) / str(node.get("checkpoint_name") or checkpoint_name(stage))


def _stage_node(cfg: DictConfig) -> tuple[str, DictConfig]:
    if cfg.get("stage") is None:
        raise InputError("no training stage given: run `python train.py +stage=1` (or +stage=2)")
    stage = str(cfg.stage)
    stages = cfg.get("stages") or {}
    if stage not in stages:
        raise InputError(f"unknown stage {stage!r}; the config defines stages {sorted(map(str, stages))}")
    return stage, stages[stage]


def widen_input_channels(state: dict[str, torch.Tensor], net: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``state`` with first-layer convolution weights grown to ``net``'s extra input channels, the new
    input slices set to zero: a network without the region channel then starts a region-channel network
    that computes exactly what it did (the region's weights are learnt from there). Other mismatches are
    left for ``load_state_dict`` to report."""
    own = net.state_dict()
    out = dict(state)
    for key, value in state.items():
        want = own.get(key)
        if (want is None or want.shape == value.shape or value.ndim < 3 or value.ndim != want.ndim
                or want.shape[0] != value.shape[0] or want.shape[2:] != value.shape[2:]
                or want.shape[1] <= value.shape[1]):
            continue
        grown = torch.zeros_like(want)
        grown[:, : value.shape[1]] = value
        out[key] = grown
    return out


def load_net_weights(net: torch.nn.Module, path: str | Path, exclude: tuple[str, ...] | list[str] = ()) -> None:
    """Initialise ``net`` from a TopoRefineNet checkpoint (Lightning file or our weights-only file); a
    checkpoint without the region input channel can start a network with one
    (:func:`widen_input_channels`). Parameters whose names start with a prefix in ``exclude`` (e.g.
    ``fusion.``) keep their fresh initialisation: a fusion ablation can then share one trained U-Net body
    and give every fusion block the same budget from scratch."""
    path = Path(path)
    if not path.exists():
        raise InputError("stage-1 checkpoint not found; run `python train.py +stage=1` first or set "
                         "the stage's init_from", path=str(path))
    ckpt = load_checkpoint(path, "stage-1 checkpoint")
    state = ckpt.get("state_dict", ckpt)
    state = {k[len("net."):]: v for k, v in state.items() if k.startswith("net.")} or state
    exclude = tuple(str(e) for e in exclude)
    state = {k: v for k, v in state.items() if not k.startswith(exclude)} if exclude else state
    state = widen_input_channels(state, net)
    # the decoder's FiLM starts as the identity and the edit gate open: weights saved without them load unchanged
    identity_init = ("decoder_film.", "edit_gate.")
    for prefix in identity_init:
        if not any(k.startswith(prefix) for k in state):
            state = {**{k: v for k, v in net.state_dict().items() if k.startswith(prefix)}, **state}
    try:
        if exclude:
            state = {**{k: v for k, v in net.state_dict().items() if k.startswith(exclude)}, **state}
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).splitlines()[1:3]
        raise InputError(f"checkpoint does not fit the configured network ({'; '.join(first).strip()}); "
                         "use the same model config as the stage that wrote it", path=str(path)) from None


def _as_float(v: Any) -> float:
    return float(v.item()) if isinstance(v, torch.Tensor) else float(v)


def refiner_settings(cfg: DictConfig) -> dict[str, Any]:
    """What shapes a stage's weights, for :func:`resume_point`: the stage's data and rates, the network, the text
    encoder, the seed; not the budget, the folders or the loader's workers."""
    stage, node = _stage_node(cfg)
    drop = {"max_steps", "max_epochs", "resume", "ckpt_dir", "checkpoint_name", "num_workers", "keyed_sampling",
            "checkpoint_minutes", "max_cpu_minutes"}
    return {"stage": str(stage), "node": without(OmegaConf.to_container(node, resolve=True), drop),
            "model": OmegaConf.to_container(cfg.model, resolve=True),
            "text_encoder": OmegaConf.to_container(cfg.text_encoder, resolve=True), "seed": cfg.get("seed")}


def module_defaults(cfg: DictConfig) -> dict[str, Any]:
    """``model.<argument>`` -> default of the model class's plain arguments (numbers, flags, strings), and
    ``model.net.<argument>`` likewise for the network's class: a run recorded before an argument existed
    resumes when the argument is left at its default (:func:`~neurorefiner.training.run_settings.differences`)."""
    import inspect

    from hydra.utils import get_class

    out: dict[str, Any] = {}
    net = cfg.model.get("net")
    for prefix, node in (("model", cfg.model), ("model.net", net if isinstance(net, DictConfig) else None)):
        target = node.get("_target_") if node is not None else None
        if not target:
            continue
        params = inspect.signature(get_class(target).__init__).parameters.values()
        out.update({f"{prefix}.{p.name}": p.default for p in params
                    if isinstance(p.default, bool | int | float | str) and p.default is not inspect.Parameter.empty})
    return out


def train_refiner(cfg: DictConfig) -> dict[str, float]:
    """Train one stage; returns the final validation metrics (``val/dice``, ``val/adherence`` ...)."""
    import lightning as L
    from hydra.utils import instantiate

    stage, node = _stage_node(cfg)
    ckpt = output_checkpoint(cfg)
    check_destination(cfg, ckpt, ckpt.with_suffix(".json"))  # before hours of training, not after
    L.seed_everything(int(cfg.get("seed", 0)), workers=True)

    text_encoder = instantiate(cfg.text_encoder)
    datamodule = instantiate(node.datamodule)
    module = instantiate(
        cfg.model,
        text_encoder=text_encoder,
        lr=node.get("lr", cfg.model.get("lr")),
        stage=int(stage),
        _convert_="partial",
    )
    # recorded after construction: passed through instantiate, these _target_ nodes would be built
    module.record_configs(OmegaConf.to_container(cfg.model.net, resolve=True),
                          OmegaConf.to_container(cfg.text_encoder, resolve=True))
    if node.get("init_from"):
        load_net_weights(module.net, node.init_from, exclude=tuple(node.get("init_exclude") or ()))

    from neurorefiner.training.distributed import check_launch, config_callbacks

    check_launch(cfg)
    # the state of an unfinished run (weights, optimiser, schedule, loop counters), saved every epoch by rank 0:
    # a killed run started again with the same command resumes from it; a finished run removes it
    run_dir = run_state_dir(cfg)
    latest = latest_checkpoint(run_dir, node.get("checkpoint_minutes"))
    from neurorefiner.training.progress import ProgressLog, SaveOnInterrupt

    overrides: dict[str, Any] = {"logger": build_loggers(cfg) or False, "enable_checkpointing": True,
                                 "callbacks": [*config_callbacks(cfg), latest,
                                               ProgressLog(run_dir / "progress.json",
                                                           max_cpu_minutes=node.get("max_cpu_minutes")),
                                               SaveOnInterrupt(run_dir / "last.ckpt")]}
    if node.get("max_steps") is not None:
        overrides["max_steps"] = int(node.max_steps)
        overrides["max_epochs"] = -1
    trainer = instantiate(cfg.trainer, **overrides)
    resume = resume_point(run_dir, refiner_settings(cfg), bool(node.get("resume", True)), module_defaults(cfg))
    if resume:  # a last.ckpt from elsewhere must not run code: refused here with a clear line
        load_checkpoint(resume, "checkpoint to resume from")

    t0 = time.time()
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume, weights_only=True)
    wall = time.time() - t0
    results = trainer.validate(module, datamodule=datamodule, verbose=False)
    metrics = {k: _as_float(v) for k, v in (results[0] if results else {}).items()}
    metrics.update({"train/wall_s": wall, "train/steps": float(trainer.global_step)})
    if "val/dice" in metrics:  # the stage exports its last weights; their validation Dice is what a sweep ranks
        metrics["val/pick"] = metrics["val/dice"]

    ckpt.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(trainer, ckpt)  # every rank calls it (Lightning's save ends in a barrier); rank 0 writes
    if trainer.is_global_zero:
        from neurorefiner.io.atomic import atomic_path

        with atomic_path(ckpt.with_suffix(".json")) as tmp:
            Path(tmp).write_text(json.dumps({"stage": int(stage), "checkpoint": str(ckpt),
                                             "resumed_from": resume, "world_size": trainer.world_size,
                                             **metrics}, indent=2))
        for f in (ckpt, ckpt.with_suffix(".json")):
            f.chmod(0o644)  # the temp files are private; the results are not
        (run_dir / "last.ckpt").unlink(missing_ok=True)  # finished: the next run of this command starts afresh
        ship(cfg, with_cards(ckpt))
    return metrics


def latest_checkpoint(run_dir: Path, minutes: float | None = None):  # type: ignore[no-untyped-def]
    """The callback that keeps ``<run_dir>/last.ckpt``: every epoch, or every ``minutes`` of training
    (``stages.<n>.checkpoint_minutes``: a long run on a shared machine loses at most that much when it is
    stopped, whatever its epoch length)."""
    from datetime import timedelta

    from lightning.pytorch.callbacks import ModelCheckpoint

    if minutes:
        if float(minutes) <= 0:
            raise InputError(f"checkpoint_minutes must be > 0, got {minutes}")
        return ModelCheckpoint(dirpath=run_dir, filename="last", monitor=None, save_top_k=1,
                               train_time_interval=timedelta(minutes=float(minutes)), enable_version_counter=False)
    return ModelCheckpoint(dirpath=run_dir, filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
                           save_on_train_epoch_end=True, enable_version_counter=False)


def run_state_dir(cfg: DictConfig) -> Path:
    """Where a stage keeps ``last.ckpt`` while it trains: ``stages.<n>.ckpt_dir`` or
    ``<paths.checkpoint_dir>/runs/refine/<checkpoint stem>`` (stable, so the same command finds it again)."""
    _, node = _stage_node(cfg)
    if node.get("ckpt_dir"):
        return Path(str(node.ckpt_dir))
    return Path(str(cfg.paths.checkpoint_dir)) / "runs" / "refine" / output_checkpoint(cfg).stem


def save_checkpoint(trainer: Any, path: Path) -> None:
    """Weights-only Lightning checkpoint (no optimizer state: small enough to ship), written atomically by
    rank 0. Every rank must call it: ``Trainer.save_checkpoint`` ends in a barrier of all ranks."""
    from neurorefiner.io.atomic import atomic_path

    if not trainer.is_global_zero:
        trainer.save_checkpoint(str(path), weights_only=True)  # writes nothing off rank 0; joins the barrier
        return
    with atomic_path(path) as tmp:
        trainer.save_checkpoint(str(tmp), weights_only=True)
