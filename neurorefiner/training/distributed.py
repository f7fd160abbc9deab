"""What a training run needs to behave on N devices as on one: per-rank seeding, callbacks from the config,
and a clear refusal where Lightning's DDP launch cannot work.

Seeding: ``lightning.seed_everything(seed)`` runs with the same seed on every rank (the network must start
identical everywhere; DDP also broadcasts rank 0's weights). What differs per rank is everything drawn after
that: :class:`StepSeed` re-seeds ``random``, numpy and torch before every training batch from
``(seed, step, rank)``, so the ranks draw different instruction swaps, and a run resumed from ``last.ckpt``
draws exactly what the killed run would have drawn (Lightning stores no RNG state in a checkpoint). The crops
themselves are keyed by :class:`~neurorefiner.data.samplers.KeyedCropSampler`, which :class:`StepSeed` points
at the trainer's step count: Lightning's epoch counters are not exact when a run with a step budget
(``max_steps``) resumes from an end-of-epoch checkpoint (it finishes the restored epoch with a short pass), the
step count is.
"""

from __future__ import annotations

import os
import random
from typing import Any

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig

from neurorefiner.errors import InputError


def step_seed(seed: int, step: int, rank: int) -> int:
    """One 32-bit seed per (run seed, optimiser step, rank)."""
    return int(np.random.SeedSequence([int(seed), int(step), int(rank)]).generate_state(1)[0])


class StepSeed(L.Callback):
    """Per-rank, resumable randomness: before every training batch, seed python, numpy and torch from
    ``(seed, global step, global rank)``; at the start of training, point every
    :class:`~neurorefiner.data.samplers.KeyedCropSampler` of the training loaders at the crops consumed so far
    (step count x accumulation x batch size), so a resumed run continues the crop stream where it stopped.

    The re-seeding acts where the crops are keyed (a distributed run, or ``keyed_sampling: true``), in a
    distributed run, or with ``always``: a plain one-device run keeps its historical RNG stream, so the
    recipes of the shipped checkpoints reproduce as they did."""

    def __init__(self, seed: int = 0, always: bool = False) -> None:
        self.seed, self.always = int(seed), bool(always)
        self._active = bool(always)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        from torch.utils.data import DataLoader

        from neurorefiner.data.samplers import KeyedCropSampler

        self._active = self.always or trainer.world_size > 1
        loaders = trainer.train_dataloader
        for dl in loaders.values() if isinstance(loaders, dict) else (
                loaders if isinstance(loaders, list | tuple) else [loaders]):
            sampler = getattr(dl, "sampler", None) if isinstance(dl, DataLoader) else None
            if isinstance(sampler, KeyedCropSampler):
                per_step = int(trainer.accumulate_grad_batches) * int(dl.batch_size or 1)
                sampler.position_fn = lambda t=trainer, k=per_step: int(t.global_step) * k
                self._active = True

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if not self._active:
            return
        s = step_seed(self.seed, trainer.global_step, trainer.global_rank)
        random.seed(s)
        np.random.seed(s)
        torch.manual_seed(s)


def config_callbacks(cfg: DictConfig) -> list[Any]:
    """The callbacks named under ``cfg.callbacks`` (a mapping of ``_target_`` nodes, as in
    lightning-hydra-template's ``callbacks/`` group; ``null`` entries are switched off), plus
    :class:`StepSeed`. Training functions add their own checkpoint callbacks to these."""
    from hydra.utils import instantiate

    out: list[Any] = [StepSeed(int(cfg.get("seed", 0)))]
    node = cfg.get("callbacks") or {}
    for value in node.values():
        if value is not None and "_target_" in value:
            out.append(instantiate(value))
    return out


def check_launch(cfg: DictConfig) -> None:
    """Refuse a combination Lightning cannot launch: ``strategy=ddp`` with several devices inside a Hydra
    multirun on one machine. Lightning's DDP starts ranks 1.. by re-running the command line, and a
    multirun command line would start a whole sweep in every rank. Under Slurm (``hydra/launcher=submitit_slurm``
    with ``tasks_per_node`` = devices) Slurm starts the ranks and Lightning launches nothing, so that is fine."""
    trainer = cfg.get("trainer") or {}
    strategy = str(trainer.get("strategy", "auto"))
    devices = trainer.get("devices", 1)
    try:
        many = int(devices) > 1 or int(trainer.get("num_nodes", 1)) > 1
    except (TypeError, ValueError):  # "auto", -1, a list of ids
        many = True
    if not (strategy.startswith("ddp") and not strategy.startswith("ddp_spawn") and many):
        return
    if "SLURM_NTASKS" in os.environ or "LOCAL_RANK" in os.environ:
        return  # Slurm (or torchrun, or a rank Lightning started) owns the processes
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        multirun = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001 - no Hydra context (a test calling train directly)
        multirun = False
    if multirun:
        raise InputError("trainer=ddp on several devices cannot run inside a local multirun (-m): Lightning "
                         "starts the other ranks by re-running the command line, which would start the sweep "
                         "again in each. Run the sweep through Slurm (hydra/launcher=submitit_slurm "
                         "hydra.launcher.tasks_per_node=<devices>), or sweep with trainer.devices=1 "
                         "(docs/training_at_scale.md)")
