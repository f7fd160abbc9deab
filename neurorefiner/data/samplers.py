"""Samplers that split the training crops and the validation items across the ranks of a distributed run.

Why not Lightning's default: under DDP Lightning swaps a plain loader's sampler for a ``DistributedSampler``,
which splits *indices*. Our training datasets ignore the index (each item is a fresh random crop drawn from
the process's RNG), so with the same seed on every rank each rank would draw the *same* crops, and N GPUs
would train on one GPU's data N times. For validation, ``DistributedSampler`` pads the item list with
repeats until it divides by the world size, so a repeated case would count twice in the validation mean and
the checkpoint pick would differ from a one-device run.

* :class:`KeyedCropSampler` yields keys ``(seed, n)``: ``n`` is the crop's place in one stream of crops shared
  by all ranks (rank ``r`` of ``W`` takes ``n = k * W + r`` for its ``k``-th crop), and a dataset draws crop
  ``n`` from ``numpy.random.default_rng(key)`` (:func:`key_rng`). So the ranks' crops are disjoint and
  deterministic, a step on W devices trains on the crops one device would see with a W times larger batch,
  and a run resumed from ``last.ckpt`` draws what the killed run would have drawn: the sampler starts each
  pass at the crops already consumed, which the training callback
  (``neurorefiner.training.distributed.StepSeed``) reads from the trainer's step count (Lightning's own
  epoch counters are not exact when a step-budgeted run resumes).
* :class:`ShardSampler` gives rank ``r`` the items ``r, r + world, ...``: every validation item exactly once
  over all ranks (unequal counts are fine: validation does no gradient sync).

Both subclass ``DistributedSampler`` only so that Lightning keeps them (it replaces any other sampler).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import torch.distributed as dist
from torch.utils.data import DistributedSampler

Key = tuple[int, int]


def rank_and_world() -> tuple[int, int]:
    """(rank, world size) of the running process group; (0, 1) outside one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def key_rng(key: tuple[int, ...] | int) -> np.random.Generator:
    """The generator that draws one keyed item: the same key gives the same crop, on any rank."""
    return np.random.default_rng([int(k) for k in key] if isinstance(key, tuple) else int(key))


def use_keyed(keyed: bool | None) -> bool:
    """Whether a datamodule draws keyed crops: ``keyed`` when set, else only in a distributed run (world > 1).
    One device keeps the historical RNG stream, so the recipes of the shipped checkpoints reproduce as before."""
    return bool(keyed) if keyed is not None else rank_and_world()[1] > 1


class KeyedCropSampler(DistributedSampler):
    """``ceil(length / world)`` keys per pass for this rank, every rank the same number (DDP's gradient sync
    needs equal step counts). Key ``(seed, n)`` with ``n = (start + j) * world + rank``, ``start`` = the crops
    this rank consumed before the pass: ``position_fn()`` when set (the trainer's step count), else
    ``epoch * ceil(length / world)`` from :meth:`set_epoch`."""

    def __init__(self, length: int, seed: int = 0, num_replicas: int | None = None, rank: int | None = None):
        if length < 1:
            raise ValueError(f"length must be >= 1, got {length}")
        own_rank, own_world = rank_and_world()
        self.num_replicas = int(num_replicas if num_replicas is not None else own_world)
        self.rank = int(rank if rank is not None else own_rank)
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank {self.rank} outside a world of {self.num_replicas}")
        self.length, self.seed, self.epoch = int(length), int(seed), 0
        self.num_samples = math.ceil(self.length / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle, self.drop_last = True, False
        self.position_fn: Callable[[], int] | None = None

    def start(self) -> int:
        """Crops this rank consumed before the coming pass."""
        return int(self.position_fn()) if self.position_fn is not None else self.epoch * self.num_samples

    def __iter__(self) -> Iterator[Key]:  # type: ignore[override]
        start, world, rank = self.start(), self.num_replicas, self.rank
        return iter((self.seed, (start + j) * world + rank) for j in range(self.num_samples))

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:  # Lightning calls it at the start of every training epoch
        self.epoch = int(epoch)


class ShardSampler(DistributedSampler):
    """Items ``rank, rank + world, ...`` of ``length``, in order, without padding: the union over the ranks is
    every item once, so a mean of per-item scores reduced over the ranks equals the one-device mean."""

    def __init__(self, length: int, num_replicas: int | None = None, rank: int | None = None):
        own_rank, own_world = rank_and_world()
        self.num_replicas = int(num_replicas if num_replicas is not None else own_world)
        self.rank = int(rank if rank is not None else own_rank)
        self.length, self.epoch, self.shuffle, self.drop_last = int(length), 0, False, False
        self.num_samples = len(range(self.rank, self.length, self.num_replicas))
        self.total_size = self.length

    def __iter__(self) -> Iterator[int]:  # type: ignore[override]
        return iter(range(self.rank, self.length, self.num_replicas))

    def __len__(self) -> int:
        return self.num_samples
