"""The loss variants of TopoRefineModule (residual: the loss on the change; clDice) and what a long run
keeps on disk (last.ckpt every N minutes, progress.json summed over resumed pieces)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from neurorefiner.errors import InputError
from neurorefiner.models.refine_module import TopoRefineModule, change_logits
from neurorefiner.models.text_encoders import HashingEncoder
from neurorefiner.models.toporefinenet import TopoRefineNet
from neurorefiner.training.progress import ProgressLog
from neurorefiner.training.refiner import latest_checkpoint
from tests.unit.test_refine_module import _batch


def _module(**kw) -> TopoRefineModule:
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16, region_channel=False)
    return TopoRefineModule(net, HashingEncoder(dim=16), swap_instruction_prob=0.0, **kw)


def test_change_logits_swap_where_the_mask_is_set() -> None:
    logits = torch.randn(2, 2, 3, 4, 4)
    mask = (torch.rand(2, 1, 3, 4, 4) > 0.5).float()
    target = (torch.rand(2, 1, 3, 4, 4) > 0.5).float()
    c = change_logits(logits, mask)
    # the same cross-entropy, read in change space
    ce_mask = F.cross_entropy(logits, target[:, 0].long())
    ce_change = F.cross_entropy(c, (mask.bool() ^ target.bool())[:, 0].long())
    assert ce_mask.item() == pytest.approx(ce_change.item(), rel=1e-5)
    one = change_logits(logits[:, 1:], mask)
    assert torch.equal(one, torch.where(mask.bool(), -logits[:, 1:], logits[:, 1:]))


def test_residual_loss_differs_from_mask_loss_and_trains() -> None:
    batch = _batch()
    plain, residual = _module(), _module(residual=True)
    with torch.no_grad():
        logits = plain(batch["image"], batch["mask"], batch["instruction"])
        a = plain._loss(logits, batch["target"], batch["mask"])
        b = residual._loss(logits, batch["target"], batch["mask"])
    assert torch.isfinite(a) and torch.isfinite(b) and abs(a.item() - b.item()) > 1e-4
    loss = residual.training_step(batch, 0)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in residual.net.parameters())


def test_cldice_term_adds_a_connectivity_loss() -> None:
    batch = _batch()
    plain, cl = _module(), _module(cldice_weight=0.5)
    with torch.no_grad():
        logits = plain(batch["image"], batch["mask"], batch["instruction"])
        assert cl._loss(logits, batch["target"], batch["mask"]) > plain._loss(logits, batch["target"], batch["mask"])
    with pytest.raises(ValueError, match="cldice_weight"):
        _module(cldice_weight=-1)


def test_last_checkpoint_every_n_minutes() -> None:
    cb = latest_checkpoint(Path("/tmp/x"), 15)
    assert cb._train_time_interval.total_seconds() == 900 and cb.filename == "last"
    assert latest_checkpoint(Path("/tmp/x"))._every_n_epochs == 1
    with pytest.raises(InputError):
        latest_checkpoint(Path("/tmp/x"), -1)


def test_progress_sums_cpu_time_over_resumed_pieces(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    trainer = SimpleNamespace(global_step=0, is_global_zero=True)
    first = ProgressLog(path, every_n_steps=1)
    first.on_train_start(trainer, None)
    trainer.global_step = 10
    sum(i * i for i in range(200_000))  # some CPU time
    first.on_train_batch_end(trainer)
    one = json.loads(path.read_text())
    assert one["global_step"] == 10 and one["current"]["steps"] == 10 and one["pieces"] == []
    second = ProgressLog(path)  # the run resumed after a stop
    second.on_train_start(trainer, None)
    trainer.global_step = 15
    second.on_train_end(trainer, None)
    two = json.loads(path.read_text())
    assert len(two["pieces"]) == 1 and two["pieces"][0]["steps"] == 10 and two["current"]["first_step"] == 10
    assert two["cpu_hours_total"] >= one["cpu_hours_total"]
    with pytest.raises(ValueError):
        ProgressLog(path, every_n_steps=0)


def test_cpu_budget_stops_the_run(tmp_path: Path) -> None:
    trainer = SimpleNamespace(global_step=0, is_global_zero=True, should_stop=False)
    log = ProgressLog(tmp_path / "p.json", max_cpu_minutes=1e-4)  # 6 ms
    log.on_train_start(trainer, None)
    trainer.global_step = 1
    log.on_train_batch_end(trainer)
    sum(i * i for i in range(300_000))
    trainer.global_step = 2
    log.on_train_batch_end(trainer)
    assert trainer.should_stop
    with pytest.raises(ValueError):
        ProgressLog(tmp_path / "p.json", max_cpu_minutes=0)
