"""Training the learned 3D refinement baselines (SegFix-, SegRefiner-, Mask Transfiner-style):
``python train.py experiment=segfix | segrefiner | transfiner``.

They learn on the same data as TopoRefineNet's stage 1 (synthetic defects cut into the gold masks of DIADEM OP_1-OP_5,
validation on fixed defects of OP_6; :class:`~neurorefiner.data.datamodules.stage1.Stage1DefectDataModule`) but get no
instruction: each refines the whole crop. One LightningModule per baseline, all measured alike on validation:
Dice of the refined crop to the gold crop (``val/dice``) beside the Dice of the defective input (``val/dice_input``),
and the share of defect voxels put right minus the share of correct voxels made wrong (``val/net_fixed``).

``train_baseline(cfg)`` reads ``cfg.baseline`` (kind, network, module settings, datamodule, steps, lr) and writes
``<paths.checkpoint_dir>/<checkpoint_name>`` (a plain dict: kind, network arguments, inference settings, weights,
final validation figures; read back with ``weights_only=True``), a JSON of the figures beside it, and the card
``<name>.md`` with the line that rebuilds it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.models.baselines.segfix import segfix_relabel, segfix_targets
from neurorefiner.models.baselines.segrefiner import corrupt, segrefiner_reverse
from neurorefiner.models.baselines.transfiner import octree_uncertain, transfiner_apply
from neurorefiner.training.loggers import build_loggers

CHECKPOINT_FORMAT = "neurorefiner-refinement-baseline/1"


def _dice(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    p, t = pred.flatten(1).float(), target.flatten(1).float()
    inter, total = (p * t).sum(1), p.sum(1) + t.sum(1)
    return torch.where(total > 0, 2 * inter / total.clamp(min=1), torch.ones_like(total))


class RefinementBaselineModule(L.LightningModule):
    """Shared training loop: AdamW, ``loss(batch)`` and ``refine(image, mask) -> bool`` from the subclass.

    Args:
        net: the baseline's network.
        lr, weight_decay: AdamW settings.
        settings: the inference settings the subclass uses in :meth:`refine` (stored in the checkpoint).
    """

    kind = ""

    def __init__(self, net: torch.nn.Module, lr: float = 1e-3, weight_decay: float = 1e-4, **settings: Any) -> None:
        super().__init__()
        if lr <= 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.net = net
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.settings = dict(settings)

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def refine(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["image"].shape[0])
        return loss

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        mask, target = batch["mask"].bool(), batch["target"].bool()
        with torch.no_grad():
            pred = self.refine(batch["image"], batch["mask"]).bool()
        wrong_before = mask ^ target
        fixed = (wrong_before & (pred == target)).flatten(1).sum(1).float()
        broken = (~wrong_before & (pred != target)).flatten(1).sum(1).float()
        n_wrong = wrong_before.flatten(1).sum(1).float().clamp(min=1)
        bs = mask.shape[0]
        figures = {"dice": _dice(pred, target).mean(), "dice_input": _dice(mask, target).mean(),
                   "net_fixed": ((fixed - broken) / n_wrong).mean(),
                   "changed_voxels": (pred ^ mask).flatten(1).sum(1).float().mean(),
                   "loss": self.loss(batch)}
        for k, v in figures.items():
            self.log(f"val/{k}", v, batch_size=bs)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.net.parameters(), lr=self.lr, weight_decay=self.weight_decay)


def _weighted_bce(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, target.float(), weight=weight)


def _soft_dice_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    p = torch.sigmoid(logits).flatten(1)
    t = target.float().flatten(1)
    return (1 - (2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1)).mean()


class SegFixModule(RefinementBaselineModule):
    """SegFix-style: boundary BCE (positives weighted ``boundary_pos_weight``) + (1 - cosine) of the direction on the
    gold boundary band (:func:`~neurorefiner.models.baselines.segfix.segfix_targets`)."""

    kind = "segfix"

    def __init__(self, net: torch.nn.Module, lr: float = 1e-3, weight_decay: float = 1e-4, band_width: float = 2.0,
                 boundary_pos_weight: float = 3.0, direction_weight: float = 1.0, step: int = 1,
                 threshold: float = 0.5) -> None:
        super().__init__(net, lr, weight_decay, band_width=float(band_width), step=int(step),
                         threshold=float(threshold))
        self.boundary_pos_weight = float(boundary_pos_weight)
        self.direction_weight = float(direction_weight)

    def targets(self, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bands, dirs = [], []
        for g in target[:, 0].bool().cpu().numpy():
            b, d = segfix_targets(g, self.settings["band_width"])
            bands.append(b)
            dirs.append(d)
        band = torch.from_numpy(np.stack(bands)[:, None]).to(target.device)
        direction = torch.from_numpy(np.stack(dirs)).to(target.device)
        return band, direction

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        out = self.net.predict(batch["image"], batch["mask"])
        band, direction = self.targets(batch["target"])
        pos_weight = torch.tensor(self.boundary_pos_weight, device=out.device)
        l_boundary = F.binary_cross_entropy_with_logits(out[:, :1], band.float(), pos_weight=pos_weight)
        cos = F.cosine_similarity(out[:, 1:], direction, dim=1, eps=1e-6)[:, None]
        l_dir = ((1 - cos) * band).sum() / band.sum().clamp(min=1)
        return l_boundary + self.direction_weight * l_dir

    @torch.no_grad()
    def refine(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = self.net.predict(image, mask)
        prob = torch.sigmoid(out[:, 0]).cpu().numpy()
        direction = out[:, 1:].cpu().numpy()
        masks = mask[:, 0].bool().cpu().numpy()
        refined = [segfix_relabel(m, p, d, self.settings["step"], self.settings["threshold"])
                   for m, p, d in zip(masks, prob, direction, strict=True)]
        return torch.from_numpy(np.stack(refined)[:, None]).to(mask.device)


class SegRefinerModule(RefinementBaselineModule):
    """SegRefiner-style: the denoiser predicts the gold crop from x_t (:func:`corrupt` between the gold crop and the
    defective one at a uniform step t in 1..T); BCE (voxels where coarse and gold differ weighted ``1 + edit_weight``)
    + soft Dice. Validation runs the whole reverse process (``steps`` denoiser calls)."""

    kind = "segrefiner"

    def __init__(self, net: torch.nn.Module, lr: float = 1e-3, weight_decay: float = 1e-4, steps: int = 6,
                 edit_weight: float = 10.0, threshold: float = 0.5) -> None:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        super().__init__(net, lr, weight_decay, steps=int(steps), threshold=float(threshold))
        self.edit_weight = float(edit_weight)

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        image, coarse, gold = batch["image"], batch["mask"], batch["target"]
        steps = self.settings["steps"]
        t = torch.randint(1, steps + 1, (image.shape[0],), device=image.device)
        x_t = corrupt(gold, coarse, t, steps)
        logits = self.net.predict(image, x_t, t.float() / steps)
        weight = 1.0 + self.edit_weight * (coarse != gold).float()
        return _weighted_bce(logits, gold, weight) + _soft_dice_loss(logits, gold)

    @torch.no_grad()
    def refine(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        steps = self.settings["steps"]
        out = []
        for i in range(image.shape[0]):
            img = image[i: i + 1]

            def predict(x: np.ndarray, t: int, img: torch.Tensor = img) -> np.ndarray:
                xt = torch.from_numpy(x.astype(np.float32))[None, None].to(img.device)
                tt = torch.full((1,), t / steps, device=img.device)
                return torch.sigmoid(self.net.predict(img, xt, tt))[0, 0].cpu().numpy()

            refined, _ = segrefiner_reverse(predict, mask[i, 0].bool().cpu().numpy(), steps,
                                            self.settings["threshold"])
            out.append(refined)
        return torch.from_numpy(np.stack(out)[:, None]).to(mask.device)


class TransfinerModule(RefinementBaselineModule):
    """Mask Transfiner-style: BCE on the uncertain voxels of the defective crop only
    (:func:`~neurorefiner.models.baselines.transfiner.octree_uncertain`), defect voxels weighted ``1 + edit_weight``."""

    kind = "transfiner"

    def __init__(self, net: torch.nn.Module, lr: float = 1e-3, weight_decay: float = 1e-4,
                 cell: tuple[int, int, int] | list[int] = (2, 8, 8), neighbours: int = 1, edit_weight: float = 2.0,
                 threshold: float = 0.5) -> None:
        super().__init__(net, lr, weight_decay, cell=[int(c) for c in cell], neighbours=int(neighbours),
                         threshold=float(threshold))
        self.edit_weight = float(edit_weight)

    def uncertain(self, mask: torch.Tensor) -> torch.Tensor:
        sel = [octree_uncertain(m, self.settings["cell"], self.settings["neighbours"])
               for m in mask[:, 0].bool().cpu().numpy()]
        return torch.from_numpy(np.stack(sel)[:, None]).to(mask.device)

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        image, coarse, gold = batch["image"], batch["mask"], batch["target"]
        logits = self.net.predict(image, coarse)
        sel = self.uncertain(coarse).float()
        weight = sel * (1.0 + self.edit_weight * (coarse != gold).float())
        bce = F.binary_cross_entropy_with_logits(logits, gold.float(), reduction="none")
        return (bce * weight).sum() / sel.sum().clamp(min=1)

    @torch.no_grad()
    def refine(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        prob = torch.sigmoid(self.net.predict(image, mask))[:, 0].cpu().numpy()
        masks = mask[:, 0].bool().cpu().numpy()
        sel = self.uncertain(mask)[:, 0].cpu().numpy()
        out = [transfiner_apply(m, p, s, self.settings["threshold"]) for m, p, s in zip(masks, prob, sel, strict=True)]
        return torch.from_numpy(np.stack(out)[:, None]).to(mask.device)


MODULES: dict[str, type[RefinementBaselineModule]] = {m.kind: m for m in (SegFixModule, SegRefinerModule,
                                                                            TransfinerModule)}


# ---------------------------------------------------------------------------------------------- train.py
def _node(cfg: DictConfig) -> DictConfig:
    node = cfg.get("baseline")
    if node is None or not node.get("kind"):
        raise InputError("task=baseline needs a baseline node: run `python train.py experiment=segfix` "
                         "(or segrefiner, transfiner)")
    if node.kind not in MODULES:
        raise InputError(f"unknown baseline kind {node.kind!r}; use one of {sorted(MODULES)}")
    return node


def baseline_checkpoint(cfg: DictConfig) -> Path:
    """Where ``train_baseline`` writes: ``paths.checkpoint_dir`` / ``baseline.checkpoint_name``
    (default ``<kind>.ckpt``)."""
    node = _node(cfg)
    return Path(str(cfg.paths.checkpoint_dir)) / str(node.get("checkpoint_name") or f"{node.kind}.ckpt")


def train_baseline(cfg: DictConfig) -> dict[str, float]:
    """Train one refinement baseline; returns the final validation figures."""
    from hydra.utils import instantiate

    from neurorefiner.training.shipping import check_destination, ship, shipped_path, with_cards

    torch.set_num_threads(int(cfg.get("threads", 1) or 1))
    node = _node(cfg)
    kind = str(node.kind)
    ckpt = baseline_checkpoint(cfg)
    check_destination(cfg, *(ckpt.with_suffix(s) for s in (".ckpt", ".json", ".md")))  # never a shipped file
    L.seed_everything(int(cfg.get("seed", 0)), workers=True)
    datamodule = instantiate(node.datamodule)
    net_config = OmegaConf.to_container(node.net, resolve=True)
    net = instantiate(node.net)
    module = MODULES[kind](net=net, lr=float(node.lr), **OmegaConf.to_container(node.module, resolve=True))

    max_steps = int(node.max_steps)
    if int(cfg.trainer.get("max_steps", -1)) > 0:  # debug=fast shrinks any recipe
        max_steps = min(max_steps, int(cfg.trainer.max_steps))
    trainer = instantiate(cfg.trainer, logger=build_loggers(cfg) or False, enable_checkpointing=False,
                          max_steps=max_steps, max_epochs=-1, num_sanity_val_steps=0,
                          check_val_every_n_epoch=10**6)  # validated once, after fit
    t0 = time.time()
    trainer.fit(module, datamodule=datamodule)
    wall = time.time() - t0
    results = trainer.validate(module, datamodule=datamodule, verbose=False)
    metrics = {k: float(v) for k, v in (results[0] if results else {}).items()}
    metrics.update({"train/wall_s": round(wall, 1), "train/steps": float(trainer.global_step)})

    ckpt.parent.mkdir(parents=True, exist_ok=True)
    record = {"format": CHECKPOINT_FORMAT, "kind": kind,
              "net_config": {k: v for k, v in net_config.items() if k != "_target_"},  # type: ignore[union-attr]
              "settings": module.settings, "train_patch": [int(s) for s in datamodule.crop_size],
              "metrics": metrics, "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()}}
    with atomic_path(ckpt) as tmp:
        torch.save(record, tmp)
    meta = {"kind": kind, "checkpoint": str(ckpt), "experiment": str(node.get("experiment") or kind),
            "seed": int(cfg.get("seed", 0)), "dataset": str(cfg.dataset.get("name", "diadem")),
            "train_cases": [v.name for v in datamodule.train_volumes],
            "val_cases": [v.name for v in datamodule.val_volumes], **metrics}
    with atomic_path(ckpt.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps(meta, indent=2))
    for f in (ckpt, ckpt.with_suffix(".json")):
        f.chmod(0o644)
    root = Path(str(cfg.paths.root_dir))
    write_text_atomic(ckpt.with_suffix(".md"),
                      baseline_card(ckpt, meta, net, node, root, max_steps, shipped_path(cfg, ckpt)))
    ckpt.with_suffix(".md").chmod(0o644)
    ship(cfg, with_cards(ckpt))
    return metrics


def _ships(meta: dict) -> bool:
    """Only the DIADEM baselines ship into checkpoints/; one trained on another dataset stays beside its refiner
    (``neurorefiner adapt`` copies it there)."""
    return meta.get("dataset", "diadem") == "diadem"


def _rebuild_line(experiment: str, meta: dict, written: Path) -> str:
    if _ships(meta):
        return f"python train.py experiment={experiment} ship=true"
    return (f"python train.py experiment={experiment} dataset={meta['dataset']} "
            f"paths.checkpoint_dir={written.parent}")


def _cases(meta: dict, key: str) -> str:
    """The cases a run learned or validated on, as its metrics file records them (older files: DIADEM's split)."""
    cases = meta.get(key)
    if cases is None:
        return "DIADEM OP_1-OP_5" if key == "train_cases" else "OP_6"
    return f"{meta.get('dataset', '')} " + ", ".join(cases)


TITLES = {"segfix": "SegFix-style boundary refinement (boundary map + per-voxel direction, boundary voxels relabelled "
                    "from the voxel their direction points to)",
          "segrefiner": "SegRefiner-style discrete-diffusion refinement (denoiser on [image; x_t; t], reverse process "
                        "from the coarse mask, confident voxels fixed first)",
          "transfiner": "Mask Transfiner-style refinement (octree of incoherent cells, a point-wise head re-classifies "
                        "only those voxels)"}


def baseline_card(ckpt: Path, meta: dict, net: torch.nn.Module, node: DictConfig, root: Path, max_steps: int,
                  shipped: Path | None = None) -> str:
    """The card beside a baseline checkpoint: every figure read from the run (nothing typed in). ``shipped`` is
    where ``ship=true`` copies the checkpoint (training itself writes ``ckpt`` under outputs/), so the card's
    rebuild line says both."""
    kind = meta["kind"]
    experiment = meta["experiment"]
    rel = ckpt.relative_to(root) if ckpt.is_relative_to(root) else ckpt
    dest = shipped.relative_to(root) if shipped is not None and shipped.is_relative_to(root) else shipped
    n_params = sum(p.numel() for p in net.parameters())
    net_args = {k: v for k, v in OmegaConf.to_container(node.net, resolve=True).items() if k != "_target_"}
    dm = node.datamodule
    lines = [f"# {ckpt.name}", "", TITLES.get(kind, kind) + ", written in this project from the paper's idea (3D, "
             "CPU-sized). A learned baseline of the paper's tables: `conf/method/" + f"{kind}.yaml`, applied window "
             "by window to the whole mask (`neurorefiner.inference.refinement_baselines`). No instruction.", "",
             f"- network: `{node.net._target_}` ({n_params:,} parameters), arguments `{net_args}`",
             f"- module settings: `{OmegaConf.to_container(node.module, resolve=True)}` (those inference uses are "
             "stored in the checkpoint)",
             f"- file: {ckpt.stat().st_size / 1e6:.2f} MB",
             "- data: the stage-1 data of TopoRefineNet (Stage1DefectDataModule): synthetic defects "
             f"(probabilities {OmegaConf.to_container(dm.defects.probs)}, no distractors) cut into gold masks of "
             f"{_cases(meta, 'train_cases')}, crops {list(dm.crop_size)} (z, y, x), batch {dm.batch_size}; "
             f"validation: {dm.val_samples} fixed defects of {_cases(meta, 'val_cases')}. No test case used.",
             "- trained on: the shared 2-core development CPU, 1 torch thread; "
             f"lr {node.lr}, seed {meta.get('seed', 0)}",
             f"- steps: {int(meta['train/steps'])} (of {max_steps}); "
             f"wall time of fit: {meta['train/wall_s'] / 60:.1f} min",
             "", f"## Validation (fixed defects of {_cases(meta, 'val_cases')}, after refinement)", ""]
    for key in ("val/dice", "val/dice_input", "val/net_fixed", "val/changed_voxels", "val/loss"):
        if key in meta:
            lines.append(f"- {key}: {meta[key]:.4f}")
    lines += ["", "val/dice_input is the Dice of the defective input itself (what a refinement must beat); "
              "val/net_fixed = (defect voxels put right - correct voxels made wrong) / defect voxels.", "",
              "## Rebuild", "", "```bash", _rebuild_line(experiment, meta, rel), "```", "",
              f"writes `{rel}` (and `{rel.with_suffix('.json')}`, this card); recipe in "
              f"`conf/experiment/{experiment}.yaml`."
              + (f" `ship=true` then copies the three into `{dest.parent}/`, the checkpoint as `{dest}`."
                 if dest is not None and _ships(meta) else ""), ""]
    return "\n".join(lines)
