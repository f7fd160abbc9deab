"""LightningModule for the baseline segmenters: softmax Dice + cross-entropy on random crops, AdamW with a
cosine schedule, and validation by sliding-window inference over whole held-out dev volumes (Dice and
clDice of the thresholded mask), which is what checkpoint selection watches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn


def voxel_scores(pred: np.ndarray, gold: np.ndarray, max_excess: float = 20.0) -> dict[str, float]:
    """Dice and clDice of two binary masks (``neurorefiner.metrics.voxel``). clDice is NaN when the
    prediction holds over ``max_excess`` times the gold voxels: an untrained network's mask, whose 3D
    skeletonisation would take minutes and tell nothing."""
    from neurorefiner.metrics.voxel import cldice, dice

    out = {"dice": float(dice(pred, gold)), "cldice": float("nan")}
    if pred.sum() <= max_excess * max(1, int(gold.sum())):
        out["cldice"] = float(cldice(pred, gold))
    return out


def trace_scores(mask: np.ndarray, gold, spacing) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """APP2 on ``mask`` seeded at the mask voxel nearest the gold root (the benchmarks' root-seeded protocol),
    scored against ``gold`` (voxel coordinates of ``mask``): ``trace_f1`` and ``trace_ssd``. An empty mask
    scores F1 0; a case without a gold tree scores nothing."""
    from neurorefiner.metrics.reconstruction import score_trees
    from neurorefiner.tracing.app2 import trace_mask
    from neurorefiner.tracing.seeding import marker_nearest_root

    if gold is None or len(gold) == 0:
        return {}
    spacing = tuple(spacing) if spacing else (1.0, 1.0, 1.0)
    if not mask.any():
        return {"trace_f1": 0.0, "trace_ssd": float("nan")}
    pred = trace_mask(mask, spacing, marker=marker_nearest_root(mask, gold, spacing))
    s = score_trees(gold, pred, spacing)
    return {"trace_f1": float(s["F1"]), "trace_ssd": float(s["SSD"])}


class SegmentationModule(L.LightningModule):
    """Args:
        net: any segmenter (N, 1, D, H, W) -> (N, 2, D, H, W) logits. Networks with auxiliary heads expose
            ``forward_aux(x) -> (logits, aux)`` and ``aux_loss(aux, label) -> Tensor``; it is added.
        net_config: the ``_target_`` recipe of ``net``, saved in the checkpoint so inference can rebuild it.
        optimizer: a partial optimizer (Hydra ``_partial_: true``); default AdamW(lr, weight_decay).
        lr, weight_decay: for the default optimizer.
        warmup_steps: linear warm-up before the cosine decay.
        patch_size, sw_overlap, sw_mode: sliding-window settings for validation (and the checkpoint).
        lambda_dice, lambda_ce: loss weights.
        normalization: the input normalisation record of the training data
            (``neurorefiner.data.transforms.normalization_spec``), kept in the checkpoint so that
            inference normalises the same way.
        foreground_prior: when set (e.g. 0.01), the output bias starts every voxel at this foreground
            probability instead of ~0.5 (``models.segmenters.output_prior``); None keeps the network's own
            initialisation (the recipe of every shipped segmenter checkpoint).
        trace_val: validation also traces the thresholded mask with APP2 from the gold root and scores the
            trace against the gold tree (``val/trace_f1``, ``val/trace_ssd``): what the benchmarks measure,
            so a checkpoint can be picked by it (``segmentation.pick: trace``), not only by Dice.
    """

    def __init__(self, net: nn.Module, net_config: dict[str, Any] | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None, lr: float = 2e-3,
                 weight_decay: float = 1e-4, warmup_steps: int = 20, patch_size: Sequence[int] = (32, 96, 96),
                 sw_overlap: float = 0.25, sw_mode: str = "gaussian", lambda_dice: float = 1.0,
                 lambda_ce: float = 1.0, threshold: float = 0.5, normalization: dict[str, Any] | None = None,
                 foreground_prior: float | None = None, trace_val: bool = False):
        super().__init__()
        from monai.losses import DiceCELoss

        self.save_hyperparameters(ignore=["net", "optimizer"])
        self.net = net
        if foreground_prior is not None:
            from neurorefiner.models.segmenters.output_prior import init_foreground_prior

            init_foreground_prior(net, foreground_prior, tuple(patch_size))
        self.optimizer_factory = optimizer
        # foreground Dice only: neurites are ~0.03 % of a stack, background Dice would swamp it
        self.loss = DiceCELoss(include_background=False, to_onehot_y=True, softmax=True,
                               lambda_dice=lambda_dice, lambda_ce=lambda_ce, batch=True)
        self._val: list[dict[str, float]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        image, label = batch["image"], batch["label"]
        if hasattr(self.net, "forward_aux"):
            logits, aux = self.net.forward_aux(image)
            seg = self.loss(logits, label)
            aux_loss = self.net.aux_loss(aux, label)
            loss = self.net.combine_losses(seg, aux_loss) if hasattr(self.net, "combine_losses") else seg + aux_loss
            self.log("train/aux_loss", aux_loss.detach(), batch_size=image.shape[0])
        else:
            loss = self.loss(self.net(image), label)
        self.log("train/loss", loss.detach(), prog_bar=True, batch_size=image.shape[0])
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        from neurorefiner.models.sliding_window import sliding_window_probs

        hp = self.hparams
        probs = sliding_window_probs(self.net, batch["image"], hp.patch_size, hp.sw_overlap, hp.sw_mode,
                                     device=self.device)
        gold = batch["label"][0, 0].cpu().numpy() > 0
        mask = probs > hp.threshold
        scores = voxel_scores(mask, gold)
        if hp.get("trace_val"):
            trees, spacings = batch.get("gold") or [None], batch.get("spacing") or [None]
            scores.update(trace_scores(mask, trees[0], spacings[0]))
        self._val.append(scores)

    def on_validation_epoch_end(self) -> None:
        """Log the mean over validation cases of each score. In a distributed run each rank holds some of the
        cases, so the per-case sums and counts are all-reduced before dividing: the mean over every case (not
        a mean of rank means, which weighs a rank with one case like a rank with three), hence the same
        checkpoint pick as on one device. Every rank joins the reduction, even one without a case."""
        keys = ("dice", "cldice", "trace_f1", "trace_ssd")
        sums = [[v[k] for v in self._val if k in v and np.isfinite(v[k])] for k in keys]
        trainer = self._trainer
        if trainer is not None and trainer.world_size > 1:
            t = torch.tensor([x for vals in sums for x in (float(np.sum(vals)) if vals else 0.0, len(vals))],
                             dtype=torch.float64, device=self.device)
            t = trainer.strategy.reduce(t, reduce_op="sum").cpu().view(len(keys), 2)
            means = [total / count if count > 0 else None for total, count in t.tolist()]
        else:
            means = [float(np.mean(vals)) if vals else None for vals in sums]
        for key, mean in zip(keys, means):
            if mean is not None:
                self.log(f"val/{key}", mean, prog_bar=True, sync_dist=False)
        self._val.clear()

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        factory = self.optimizer_factory or partial(torch.optim.AdamW, lr=self.hparams.lr,
                                                    weight_decay=self.hparams.weight_decay)
        opt = factory(self.parameters())
        total = max(1, int(self.trainer.estimated_stepping_batches)) if self.trainer else 1000
        warm = min(int(self.hparams.warmup_steps), max(0, total - 1))

        def schedule(step: int) -> float:
            if step < warm:
                return (step + 1) / (warm + 1)
            t = (step - warm) / max(1, total - warm)
            return 0.5 * (1.0 + float(np.cos(np.pi * min(1.0, t))))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
