"""TopoRefineModule: loss and metrics on contract-shaped batches, the instructed-target rule used for
instruction swapping, the adherence metric, and one optimisation step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from neurorefiner.models.refine_module import (
    TopoRefineModule,
    adherence_per_sample,
    betti0,
    dice_per_sample,
    instructed_target,
    operation_adds,
)
from neurorefiner.models.text_encoders import HashingEncoder
from neurorefiner.models.toporefinenet import TopoRefineNet


def _batch(b=2, shape=(6, 12, 12)):
    gold = torch.zeros(b, 1, *shape)
    gold[:, :, 3, 6, :] = 1
    mask = gold.clone()
    mask[0, :, 3, 6, 2:5] = 0  # a break in sample 0 (left)
    mask[1, :, 1, 1:3, 9:11] = 1  # noise in sample 1 (right)
    region = torch.zeros(b, 1, *shape, dtype=torch.bool)
    region[0, :, :, :, :6] = True
    region[1, :, :, :, 8:] = True
    return {"image": gold * 0.8 + 0.1, "mask": mask, "target": gold,
            "instruction": ["Repair break at center-left-center", "Remove isolated noise at top-right-front"][:b],
            "region": region}


def test_metric_helpers():
    a = torch.zeros(2, 1, 4, 4, 4, dtype=torch.bool)
    a[0, 0, 0, 0, :2] = True
    b = a.clone()
    b[0, 0, 1, 1, 1] = True
    d = dice_per_sample(a, b)
    assert d[0] == pytest.approx(2 * 2 / 5) and d[1] == 1.0  # both empty -> 1
    region = torch.zeros_like(a)
    region[0, 0, 1] = True
    share, n = adherence_per_sample(b, a, region)
    assert share[0] == 1.0 and n[0] == 1 and math.isnan(share[1])
    vol = np.zeros((5, 5, 5), bool)
    vol[0, 0, 0] = vol[4, 4, 4] = vol[3, 3, 3] = True
    assert betti0(vol) == 2  # (3,3,3)-(4,4,4) touch diagonally (26-connectivity)


def test_instructed_target_only_does_what_it_is_told():
    batch = _batch()
    m, g, r = batch["mask"], batch["target"], batch["region"]
    adds = operation_adds(m, g)
    assert adds.tolist() == [True, False]
    # sample 0 told to repair in its own region -> gold; told to repair on the right -> nothing to add
    t = instructed_target(m, g, r, torch.tensor([True, True]))
    assert torch.equal(t[0], g[0])
    t_wrong = instructed_target(m, g, r.flip(0), torch.tensor([True, False]))
    assert torch.equal(t_wrong[0], m[0])  # the gold on the right is already in the mask
    # removal never adds, addition never removes
    t_rm = instructed_target(m, g, torch.ones_like(r), torch.tensor([False, False]))
    assert not (t_rm.bool() & ~m.bool()).any()
    assert torch.equal(t_rm[1], g[1])  # the noise goes
    assert torch.equal(t_rm[0], m[0])  # "remove" on a break changes nothing


def test_swap_pairs_targets_with_borrowed_instructions():
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    mod = TopoRefineModule(net, HashingEncoder(dim=16), swap_instruction_prob=1.0)
    batch = _batch()
    instr, target, region = mod._swap(batch)
    assert instr == batch["instruction"][::-1]
    assert torch.equal(region, batch["region"].flip(0))
    # sample 0 borrowed "remove noise on the right": its break stays, nothing to remove there
    assert torch.equal(target[0], batch["mask"][0])
    # sample 1 borrowed "repair on the left": nothing missing there, its noise stays
    assert torch.equal(target[1], batch["mask"][1])
    mod0 = TopoRefineModule(net, HashingEncoder(dim=16), swap_instruction_prob=0.0)
    assert mod0._swap(batch)[0] == batch["instruction"]


def test_step_and_evaluate():
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    mod = TopoRefineModule(net, HashingEncoder(dim=16), optimizer=None, lr=1e-2)
    opt = mod.configure_optimizers()
    batch = _batch()
    before = [p.detach().clone() for p in net.parameters()]
    loss = mod.training_step(batch, 0)
    assert loss.ndim == 0 and torch.isfinite(loss)
    loss.backward()
    opt.step()
    assert any(not torch.equal(a, p) for a, p in zip(before, net.parameters(), strict=True))
    m = mod.evaluate_batch(batch)
    assert set(m) == {"loss", "dice", "dice_input", "betti0_error", "adherence", "changed_voxels"}
    assert 0 <= m["dice"] <= 1 and m["betti0_error"] >= 0
    assert m["dice_input"] == pytest.approx(float(dice_per_sample(batch["mask"].bool(), batch["target"].bool()).mean()))


@pytest.mark.parametrize("kw", [dict(swap_instruction_prob=1.5), dict(ce_weight=0, dice_weight=0), dict(lr=-1),
                                dict(edit_weight=-1), dict(negative_weight=-1)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        TopoRefineModule(TopoRefineNet(channels=(4, 8), text_dim=4), HashingEncoder(dim=4), **kw)


def test_hparams_record_configs():
    mod = TopoRefineModule(TopoRefineNet(channels=(4, 8), text_dim=4), HashingEncoder(dim=4), stage=1)
    mod.record_configs({"_target_": "x"}, {"_target_": "y"})
    assert mod.hparams["net_config"] == {"_target_": "x"} and mod.hparams["stage"] == 1


def test_edit_weight_adds_ce_on_the_voxels_to_change():
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    plain = TopoRefineModule(net, HashingEncoder(dim=16), edit_weight=0.0)
    weighted = TopoRefineModule(net, HashingEncoder(dim=16), edit_weight=2.0)
    batch = _batch()
    logits = net(batch["image"], batch["mask"], plain.embed(batch["instruction"]))
    base = plain._loss(logits, batch["target"], batch["mask"])
    extra = weighted._loss(logits, batch["target"], batch["mask"]) - base
    edit = (batch["mask"].bool() ^ batch["target"].bool())[:, 0]
    ce = torch.nn.functional.cross_entropy(logits, batch["target"][:, 0].long(), reduction="none")
    assert extra.item() == pytest.approx(2.0 * ce[edit].sum().item() / ce.numel(), rel=1e-5)
    # nothing to change -> no extra term
    same = weighted._loss(logits, batch["mask"], batch["mask"]) - plain._loss(logits, batch["mask"], batch["mask"])
    assert same.item() == pytest.approx(0.0, abs=1e-6)


def test_negative_weight_prices_changes_in_the_region_of_a_no_change_sample():
    """A sample whose instruction asks for nothing (target == mask) pays ``negative_weight`` extra CE on its
    named region's voxels; a sample with an edit pays none of it."""
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    plain = TopoRefineModule(net, HashingEncoder(dim=16))
    neg = TopoRefineModule(net, HashingEncoder(dim=16), negative_weight=3.0)
    batch = _batch()
    logits = net(batch["image"], batch["mask"], plain.embed(batch["instruction"]))
    target = batch["target"].clone()
    target[0] = batch["mask"][0]  # sample 0 asks for no change; sample 1 keeps its edit
    assert bool((batch["mask"][1].bool() ^ target[1].bool()).any())
    extra = neg._loss(logits, target, batch["mask"], batch["region"]) - plain._loss(logits, target, batch["mask"])
    ce = torch.nn.functional.cross_entropy(logits, target[:, 0].long(), reduction="none")
    region0 = batch["region"][0, 0].bool()
    assert region0.any()
    assert extra.item() == pytest.approx(3.0 * ce[0][region0].sum().item() / ce.numel(), rel=1e-5)
    # without the region the term cannot be placed and is left out
    assert neg._loss(logits, target, batch["mask"]).item() == pytest.approx(
        plain._loss(logits, target, batch["mask"]).item(), rel=1e-6)


def test_batch_dice_prices_a_no_change_sample_s_changes():
    """Residual loss, per-sample Dice: a no-change sample's Dice term is ~1 whatever is changed; over the
    batch, changing voxels in that sample raises the loss."""
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=16)
    batch = _batch()
    target = batch["target"].clone()
    target[0] = batch["mask"][0]
    keep = torch.where(target.bool(), 5.0, -5.0).repeat(1, 2, 1, 1, 1)
    keep[:, 0] *= -1  # logits of the right answer: sample 0 unchanged, sample 1's edit made
    noisy = keep.clone()
    noisy[0, :, 0, 0, :4] *= -1  # sample 0 now changes four voxels
    for batch_dice, grows in ((False, False), (True, True)):
        mod = TopoRefineModule(net, HashingEncoder(dim=16), residual=True, batch_dice=batch_dice, ce_weight=1e-6)
        d = (mod._loss(noisy, target, batch["mask"]) - mod._loss(keep, target, batch["mask"])).item()
        assert (d > 0.05) is grows, (batch_dice, d)


def test_region_channel_net_gets_the_swapped_region():
    """With instruction swapping the network must see the region of the instruction it is given."""
    net = TopoRefineNet(channels=(4, 8), text_dim=16, region_channel=True)
    seen = []
    net.register_forward_pre_hook(lambda mod, args, kwargs: seen.append(kwargs["region"].clone()),
                                  with_kwargs=True)
    mod = TopoRefineModule(net, HashingEncoder(dim=16), swap_instruction_prob=1.0)
    mod.log = lambda *a, **k: None
    batch = _batch()
    mod.training_step(batch, 0)
    assert torch.equal(seen[-1].bool(), batch["region"].flip(0).bool())
    mod.evaluate_batch(batch)
    assert torch.equal(seen[-1].bool(), batch["region"].bool())
