"""TopoRefineModule: trains TopoRefineNet (cross-entropy + Dice, AdamW) and measures what matters for
an editing tool: Dice to the target, Betti-0 error of the block, and instruction adherence.

Instruction adherence is the share of the voxels the model changed (prediction vs input mask) that lie
inside the region the instruction names; an editor that obeys "repair break at top-right-front" should
change voxels there and nowhere else.

Instruction swapping (``swap_instruction_prob``): a model trained only on (defect, correct instruction)
pairs can ignore the text, because the defect is visible in the image. So a share of each training
batch is re-paired with another sample's instruction and region, and the target becomes the edit *that*
instruction asks for: an add-operation (connect / repair) may only add gold voxels inside its region, a
remove-operation may only delete non-gold voxels inside its region, everything else stays as the input
mask. The operation of the borrowed instruction is read from its own sample (did its target add or
remove voxels?), so this module needs no grammar.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from monai.losses import DiceCELoss, SoftclDiceLoss

from neurorefiner.models.text_encoders import TextEncoder
from neurorefiner.topology.components import betti0


def dice_per_sample(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Dice of boolean (B, 1, ...) tensors per sample; 1 where both are empty."""
    p, t = pred.flatten(1).float(), target.flatten(1).float()
    inter, total = (p * t).sum(1), p.sum(1) + t.sum(1)
    return torch.where(total > 0, 2 * inter / total.clamp(min=1), torch.ones_like(total))


def adherence_per_sample(pred: torch.Tensor, mask: torch.Tensor, region: torch.Tensor) -> tuple[torch.Tensor,
                                                                                            torch.Tensor]:
    """(share of changed voxels inside ``region``, number of changed voxels) per sample; the share is NaN
    where nothing changed."""
    changed = (pred.bool() ^ mask.bool()).flatten(1)
    n = changed.sum(1).float()
    inside = (changed & region.bool().flatten(1)).sum(1).float()
    share = torch.where(n > 0, inside / n.clamp(min=1), torch.full_like(n, float("nan")))
    return share, n


def instructed_target(mask: torch.Tensor, gold: torch.Tensor, region: torch.Tensor, add: torch.Tensor
                      ) -> torch.Tensor:
    """The mask an instruction asks for: add gold voxels inside ``region`` (``add`` True) or remove
    non-gold voxels inside ``region`` (``add`` False); untouched elsewhere. Tensors (B, 1, ...); ``add``
    (B,) bool."""
    m, g, r = mask.bool(), gold.bool(), region.bool()
    added = m | (g & r)
    removed = m & (g | ~r)
    sel = add.view(-1, *([1] * (mask.ndim - 1)))
    return torch.where(sel, added, removed).to(mask.dtype)


def change_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mask logits read as logits of the change to ``mask``: where the mask is set, "foreground" means
    "keep" (no change), so the two channels swap (one channel: the sign flips). The CE of these against
    ``mask XOR target`` equals the mask CE; the Dice of the change does not."""
    m = mask.bool()
    if logits.shape[1] == 1:
        return torch.where(m, -logits, logits)
    return torch.where(m, logits.flip(1), logits)


def operation_adds(mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B,) bool: does the target add more voxels to the mask than it removes (connect / repair)?"""
    m, t = mask.bool().flatten(1), target.bool().flatten(1)
    return (t & ~m).sum(1) >= (m & ~t).sum(1)


VAL_KEYS = ("loss", "dice", "dice_input", "betti0_error", "adherence", "changed_voxels")


class TopoRefineModule(L.LightningModule):
    """LightningModule around a :class:`~neurorefiner.models.toporefinenet.TopoRefineNet`.

    Args:
        net: the network, ``forward(image, mask, text_embedding) -> logits`` (B, 2, ...).
        text_encoder: frozen encoder turning instruction strings into embeddings (kept out of the
            checkpoint; ``text_encoder_config`` records how to rebuild it).
        optimizer: partial optimizer (``params`` still missing), AdamW by default.
        lr: overrides the optimizer's learning rate when given (the stage config sets it).
        ce_weight, dice_weight: weights of the two loss terms.
        swap_instruction_prob: share of training samples re-paired with another sample's instruction.
        edit_weight: extra cross-entropy weight of the voxels the edit must change (input mask XOR
            target): they count ``1 + edit_weight`` times in the CE. They are a tiny share of a block, so
            plain CE + Dice first learns to copy the mask and is slow to learn the edit itself; 0 gives the
            paper's plain CE + Dice.
        residual: read the output as the *change* to the input mask and put the loss there: cross-entropy +
            Dice of the change (input XOR output) against the edit (input XOR target). The mask-space CE is the
            same number; the Dice is not: on the mask it is dominated by the voxels left alone, on the change
            it is all about the edit. The network and what it returns stay as they are (mask logits).
        cldice_weight: weight of MONAI's SoftclDiceLoss (soft skeleton recall/precision, Shit et al. 2021) on
            the foreground of the output mask: a term that pays for a continuous neurite, which a filled
            gap makes and a voxel-wise loss hardly notices. 0 = off.
        negative_weight: extra cross-entropy weight of the voxels inside the named region of samples whose
            instruction asks for no change (a wrong place, the opposite operation: target == input mask).
            ``edit_weight`` pays 1 + w for every voxel of an edit the network misses but only 1 for a voxel it
            changes where nothing was asked, so the weighted network edits wherever it is a little unsure;
            this puts the same price on a change inside a region the instruction leaves alone. 0 = off.
        batch_dice: compute the Dice over the batch rather than per sample. Per sample, a sample that asks
            for no change has an empty target, and (with ``residual``) its Dice is ~1 whatever the network
            changes: the hard negatives then teach through the CE alone. Over the batch, a negative's
            changes enlarge the batch's denominator and cost Dice.
        gate_weight: weight of the binary cross-entropy of the network's edit gate (``net.edit_gate``, when it
            has one) against whether the sample asks for any change at all: the block-level decision a
            voxel-wise loss prices only by the few voxels an unasked change touches.
        cosine: cosine-anneal the learning rate over ``trainer.max_steps`` when that is set.
        net_config, text_encoder_config: the Hydra nodes of both, stored in the checkpoint so that
            :class:`~neurorefiner.inference.refiner.TopoRefiner` can rebuild the model from the file alone.
        stage: training stage (1 or 2), recorded in the checkpoint.
    """

    def __init__(self, net: torch.nn.Module, text_encoder: TextEncoder | None = None,
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None, lr: float | None = None,
                 ce_weight: float = 1.0, dice_weight: float = 1.0, swap_instruction_prob: float = 0.25,
                 edit_weight: float = 0.0, residual: bool = False, cldice_weight: float = 0.0,
                 negative_weight: float = 0.0, batch_dice: bool = False, gate_weight: float = 1.0,
                 cosine: bool = True,
                 net_config: dict | None = None, text_encoder_config: dict | None = None,
                 stage: int | None = None) -> None:
        super().__init__()
        if not 0.0 <= swap_instruction_prob <= 1.0:
            raise ValueError(f"swap_instruction_prob must be in [0, 1], got {swap_instruction_prob}")
        if ce_weight < 0 or dice_weight < 0 or ce_weight + dice_weight == 0:
            raise ValueError("ce_weight and dice_weight must be >= 0 and not both 0")
        if edit_weight < 0:
            raise ValueError(f"edit_weight must be >= 0, got {edit_weight}")
        if cldice_weight < 0:
            raise ValueError(f"cldice_weight must be >= 0, got {cldice_weight}")
        if negative_weight < 0:
            raise ValueError(f"negative_weight must be >= 0, got {negative_weight}")
        if lr is not None and lr <= 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.save_hyperparameters(ignore=["net", "text_encoder", "optimizer"])
        self.net = net
        self.text_encoder = text_encoder
        self.optimizer_factory = optimizer
        self.loss_fn = DiceCELoss(to_onehot_y=True, softmax=True, lambda_ce=ce_weight, lambda_dice=dice_weight,
                                  batch=batch_dice)
        self.cldice_fn = SoftclDiceLoss(iter_=3, include_background=False) if cldice_weight > 0 else None
        self._val_sums: dict[str, list[float]] | None = None

    def record_configs(self, net_config: dict | None, text_encoder_config: dict | None) -> None:
        """Store the Hydra nodes of the network and text encoder in the hyperparameters (and so in every
        checkpoint), so the model can be rebuilt from the checkpoint file alone."""
        self.hparams["net_config"] = net_config
        self.hparams["text_encoder_config"] = text_encoder_config

    # -- helpers -------------------------------------------------------------------------------------------
    def embed(self, instructions: list[str]) -> torch.Tensor:
        if self.text_encoder is None:
            raise RuntimeError("TopoRefineModule has no text_encoder; pass one to embed instructions")
        return self.text_encoder.encode(list(instructions)).to(self.device)

    def forward(self, image: torch.Tensor, mask: torch.Tensor, instructions: list[str],
                region: torch.Tensor | None = None) -> torch.Tensor:
        """Logits; ``region`` (the instructions' named sub-regions) reaches networks built to read it."""
        if getattr(self.net, "region_channel", False):
            return self.net(image, mask, self.embed(instructions), region=region)
        return self.net(image, mask, self.embed(instructions))

    def _swap(self, batch: dict[str, Any]) -> tuple[list[str], torch.Tensor, torch.Tensor]:
        """Instructions, targets and regions after re-pairing a random share of the batch."""
        instr = list(batch["instruction"])
        target, region = batch["target"], batch["region"]
        b = len(instr)
        p = float(self.hparams.swap_instruction_prob)
        if b < 2 or p <= 0:
            return instr, target, region
        pick = torch.rand(b, device=target.device) < p
        if not bool(pick.any()):
            return instr, target, region
        src = torch.roll(torch.arange(b, device=target.device), shifts=-1)
        adds = operation_adds(batch["mask"], target)[src]
        new_t = instructed_target(batch["mask"], target, region[src], adds)
        sel = pick.view(-1, *([1] * (target.ndim - 1)))
        target = torch.where(sel, new_t, target)
        region = torch.where(sel, region[src], region)
        instr = [instr[int(src[i])] if bool(pick[i]) else instr[i] for i in range(b)]
        return instr, target, region

    def _loss(self, logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
              region: torch.Tensor | None = None) -> torch.Tensor:
        if self.hparams.get("residual", False):
            loss = self.loss_fn(change_logits(logits, mask), (mask.bool() ^ target.bool()).float())
        else:
            loss = self.loss_fn(logits, target.float())
        if self.cldice_fn is not None:
            fg = self.net.probabilities(logits) if hasattr(self.net, "probabilities") else torch.sigmoid(logits)
            two = torch.cat([1 - fg, fg], dim=1)  # SoftclDiceLoss reads channel 1 on (B, 2, ...) probabilities
            tgt = torch.cat([1 - target.float(), target.float()], dim=1)
            loss = loss + float(self.hparams.cldice_weight) * self.cldice_fn(two, tgt)
        w = float(self.hparams.edit_weight)
        wn = float(self.hparams.get("negative_weight", 0.0)) if region is not None else 0.0
        if w > 0 or wn > 0:
            edit = (mask.bool() ^ target.bool())[:, 0]
            if logits.shape[1] > 1:
                ce = F.cross_entropy(logits, target[:, 0].long(), reduction="none")
            else:
                ce = F.binary_cross_entropy_with_logits(logits[:, 0], target[:, 0].float(), reduction="none")
            weight = w * edit.float()
            if wn > 0:
                asks_nothing = ~edit.flatten(1).any(1)
                weight = weight + wn * (region.bool()[:, 0] & asks_nothing.view(-1, *([1] * (edit.ndim - 1))))
            loss = loss + (ce * weight).float().mean()
        gate, wg = getattr(self.net, "last_gate_logit", None), float(self.hparams.get("gate_weight", 1.0))
        if gate is not None and wg > 0:
            asks = (mask.bool() ^ target.bool()).flatten(1).any(1).float()
            loss = loss + wg * F.binary_cross_entropy_with_logits(gate.float(), asks)
        return loss

    # -- Lightning -----------------------------------------------------------------------------------------
    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        instr, target, region = self._swap(batch)
        logits = self(batch["image"], batch["mask"], instr, region)
        loss = self._loss(logits, target, batch["mask"], region)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(instr))
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val_sums = {k: [0.0, 0.0] for k in VAL_KEYS}

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        sums = getattr(self, "_val_sums", None)
        if sums is None:
            self.on_validation_epoch_start()
            sums = self._val_sums
        for k, (total, count) in self.evaluate_sums(batch).items():
            sums[k][0] += total
            sums[k][1] += count

    def on_validation_epoch_end(self) -> None:
        """Log each metric as (sum over samples) / (number of samples) over ALL ranks: the sums and counts are
        all-reduced first, so the figure (and the checkpoint it picks) is the one-device figure whatever the
        split of the validation items across ranks. Every rank reduces the same fixed-size tensor, even one
        that saw no batch, so the collective never waits on a rank that has nothing to say."""
        sums = getattr(self, "_val_sums", None) or {k: [0.0, 0.0] for k in VAL_KEYS}
        t = torch.tensor([v for k in VAL_KEYS for v in sums[k]], dtype=torch.float64, device=self.device)
        trainer = self._trainer
        if trainer is not None and trainer.world_size > 1:
            t = trainer.strategy.reduce(t, reduce_op="sum")
        t = t.cpu().view(len(VAL_KEYS), 2)
        for k, (total, count) in zip(VAL_KEYS, t.tolist()):
            if count > 0:  # adherence where no sample changed anything: nothing to average
                self.log(f"val/{k}", total / count, prog_bar=k in ("dice", "adherence"), sync_dist=False)
        self._val_sums = None

    @torch.no_grad()
    def evaluate_sums(self, batch: dict[str, Any]) -> dict[str, tuple[float, float]]:
        """(sum over the batch's samples, number of samples) of each validation metric: loss, Dice, the input
        mask's Dice (for scale), Betti-0 error, changed voxels, and adherence (only over the samples where
        the prediction changed something). Sums add across batches and ranks; a batch mean would not."""
        logits = self(batch["image"], batch["mask"], list(batch["instruction"]), batch["region"])
        target = batch["target"]
        b = int(target.shape[0])
        pred = logits.argmax(1, keepdim=True).bool() if logits.shape[1] > 1 else logits > 0
        share, n_changed = adherence_per_sample(pred, batch["mask"], batch["region"])
        p_np, t_np = pred.cpu().numpy(), target.bool().cpu().numpy()
        b0 = [abs(betti0(p_np[i, 0]) - betti0(t_np[i, 0])) for i in range(len(p_np))]
        defined = share[~torch.isnan(share)]
        # the loss is a mean over samples of equal size (CE over voxels, Dice per sample): x b is its sum
        return {
            "loss": (float(self._loss(logits, target, batch["mask"], batch["region"])) * b, float(b)),
            "dice": (float(dice_per_sample(pred, target.bool()).double().sum()), float(b)),
            "dice_input": (float(dice_per_sample(batch["mask"].bool(), target.bool()).double().sum()), float(b)),
            "betti0_error": (float(np.sum(b0)), float(b)),
            "adherence": (float(defined.double().sum()), float(len(defined))),
            "changed_voxels": (float(n_changed.double().sum()), float(b)),
        }

    def evaluate_batch(self, batch: dict[str, Any]) -> dict[str, float]:
        """Loss, Dice, Betti-0 error, adherence (and the input mask's Dice, for scale) of one batch: the
        means of :meth:`evaluate_sums` (adherence NaN where nothing changed)."""
        return {k: total / count if count > 0 else float("nan")
                for k, (total, count) in self.evaluate_sums(batch).items()}

    def configure_optimizers(self):
        factory = self.optimizer_factory
        if factory is None:
            opt = torch.optim.AdamW(self.net.parameters(), lr=self.hparams.lr or 1e-3, weight_decay=1e-4)
        elif self.hparams.lr is not None:
            opt = factory(params=self.net.parameters(), lr=self.hparams.lr)
        else:
            opt = factory(params=self.net.parameters())
        max_steps = getattr(self.trainer, "max_steps", -1) if self._trainer is not None else -1
        if self.hparams.cosine and max_steps and max_steps > 0:
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max_steps, eta_min=opt.defaults["lr"] * 0.05)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
        return opt
