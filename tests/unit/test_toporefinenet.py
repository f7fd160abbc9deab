"""TopoRefineNet: output shapes for odd and small blocks (pad + crop back), text dependence, the mask
prior, bad arguments, and that it can learn a location-specific edit from text alone."""

from __future__ import annotations

import pytest
import torch

from neurorefiner.models.toporefinenet import TopoRefineNet


@pytest.mark.parametrize("fusion", ["cab", "adaln", "cdp"])
@pytest.mark.parametrize("size", [(8, 16, 16), (5, 7, 9), (1, 3, 2), (12, 20, 17)])
def test_shapes_any_block_size(fusion, size):
    net = TopoRefineNet(channels=(4, 8, 16), text_dim=10, fusion=fusion)
    x = torch.rand(2, 1, *size)
    m = (torch.rand(2, 1, *size) > 0.5).float()
    y = net(x, m, torch.randn(2, 10))
    assert y.shape == (2, 2, *size)
    p = net.probabilities(y)
    p = p.detach()
    assert p.shape == (2, 1, *size) and float(p.min()) >= 0 and float(p.max()) <= 1


def test_two_dimensional_and_token_context():
    net = TopoRefineNet(spatial_dims=2, channels=(4, 8), text_dim=6)
    y = net(torch.rand(1, 1, 9, 11), torch.zeros(1, 1, 9, 11), torch.randn(1, 3, 6))
    assert y.shape == (1, 2, 9, 11)


def test_text_changes_output_and_mask_prior():
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8, 16), text_dim=8).eval()
    x, m = torch.rand(1, 1, 8, 16, 16), torch.zeros(1, 1, 8, 16, 16)
    m[..., 4:, :, :] = 1
    with torch.no_grad():
        a, b = net(x, m, torch.randn(1, 8)), net(x, m, torch.randn(1, 8))
    assert not torch.allclose(a, b)
    # the learned prior adds w * (2m - 1) to the foreground-minus-background logit
    nop = TopoRefineNet(channels=(4, 8, 16), text_dim=8, mask_skip=False).eval()
    nop.load_state_dict({k: v for k, v in net.state_dict().items() if k != "mask_weight"})
    with torch.no_grad():
        t = torch.randn(1, 8)
        diff = (net(x, m, t)[:, 1] - net(x, m, t)[:, 0]) - (nop(x, m, t)[:, 1] - nop(x, m, t)[:, 0])
    assert torch.allclose(diff, 2.0 * (2 * m[:, 0] - 1), atol=1e-5)


@pytest.mark.parametrize("kw", [dict(spatial_dims=1), dict(channels=(8,)), dict(channels=(8, 0)),
                                dict(in_channels=1), dict(out_channels=3), dict(text_dim=0),
                                dict(fusion="nope"), dict(fusion_depth=0)])
def test_bad_arguments(kw):
    with pytest.raises(ValueError):
        TopoRefineNet(**kw)


def test_bad_inputs():
    net = TopoRefineNet(channels=(4, 8), text_dim=4)
    with pytest.raises(ValueError, match="text_embedding"):
        net(torch.rand(1, 1, 4, 4, 4), torch.zeros(1, 1, 4, 4, 4), torch.randn(1, 5))
    with pytest.raises(ValueError, match="differ"):
        net(torch.rand(1, 1, 4, 4, 4), torch.zeros(1, 1, 4, 4, 5), torch.randn(1, 4))
    with pytest.raises(ValueError, match="B, C"):
        net(torch.rand(1, 4, 4, 4), torch.zeros(1, 4, 4, 4), torch.randn(1, 4))


@pytest.mark.parametrize("fusion", ["cab", "adaln", "cdp"])
def test_learns_to_edit_where_the_text_says(fusion):
    """Two instructions, identical image and mask: 'fill the left half' vs 'fill the right half'. Only
    the text tells them apart, and position words need the bottleneck's position embedding."""
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=2, fusion=fusion)
    opt = torch.optim.Adam(net.parameters(), lr=2e-2)
    x = torch.zeros(2, 1, 4, 6, 6)
    m = torch.zeros(2, 1, 4, 6, 6)
    t = torch.eye(2)
    target = torch.zeros(2, 4, 6, 6, dtype=torch.long)
    target[0, :, :, :3] = 1
    target[1, :, :, 3:] = 1
    for _ in range(80):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x, m, t), target)
        loss.backward()
        opt.step()
    pred = net(x, m, t).argmax(1)
    acc = (pred == target).float().mean()
    assert acc > 0.95, float(acc)


def test_region_channel_is_an_input_and_required():
    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True).eval()
    assert net.encoder[0].conv1.conv.in_channels == 3
    x, m, t = torch.rand(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8), torch.rand(1, 3)
    with pytest.raises(ValueError, match="region"):
        net(x, m, t)
    with pytest.raises(ValueError, match="region must be"):
        net(x, m, t, region=torch.zeros(1, 1, 4, 8, 7))
    left, right = torch.zeros(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8)
    left[..., :4], right[..., 4:] = 1, 1
    assert not torch.allclose(net(x, m, t, region=left), net(x, m, t, region=right))
    plain = TopoRefineNet(channels=(4, 8), text_dim=3).eval()
    assert torch.equal(plain(x, m, t, region=left), plain(x, m, t))  # ignored without the channel


def test_two_channel_weights_start_a_region_channel_net_unchanged(tmp_path):
    from neurorefiner.training.refiner import load_net_weights

    torch.manual_seed(0)
    old = TopoRefineNet(channels=(4, 8), text_dim=3).eval()
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in old.state_dict().items()}}, path)
    new = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True).eval()
    load_net_weights(new, path)
    x, m, t = torch.rand(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8), torch.rand(1, 3)
    region = torch.ones(1, 1, 4, 8, 8)
    assert torch.allclose(new(x, m, t, region=region), old(x, m, t), atol=1e-6)
    other = TopoRefineNet(channels=(4, 16), text_dim=3, region_channel=True)
    with pytest.raises(Exception, match="does not fit"):
        load_net_weights(other, path)


def test_init_can_leave_the_fusion_fresh(tmp_path):
    """Fusion ablation: the U-Net body comes from the checkpoint, the (other) fusion block stays fresh."""
    from neurorefiner.training.refiner import load_net_weights

    torch.manual_seed(0)
    cab = TopoRefineNet(channels=(4, 8), text_dim=3, fusion="cab", region_channel=True)
    path = tmp_path / "cab.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in cab.state_dict().items()}}, path)
    adaln = TopoRefineNet(channels=(4, 8), text_dim=3, fusion="adaln", region_channel=True)
    fresh = {k: v.clone() for k, v in adaln.state_dict().items() if k.startswith("fusion.")}
    with pytest.raises(Exception, match="does not fit"):
        load_net_weights(adaln, path)
    load_net_weights(adaln, path, exclude=["fusion."])
    state = adaln.state_dict()
    assert all(torch.equal(state[k], v) for k, v in fresh.items())
    assert torch.equal(state["encoder.0.conv1.conv.weight"], cab.state_dict()["encoder.0.conv1.conv.weight"])


def test_decoder_film_starts_as_the_identity_and_lets_the_text_reach_full_resolution(tmp_path):
    """text_film: weights saved without it load unchanged (same output); once trained, the instruction changes
    the full-resolution features even with the bottleneck's fusion taken out of the picture."""
    from neurorefiner.training.refiner import load_net_weights

    torch.manual_seed(0)
    old = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True).eval()
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in old.state_dict().items()}}, path)
    film = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True, text_film=True).eval()
    load_net_weights(film, path)
    x, m, r = torch.rand(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8), torch.ones(1, 1, 4, 8, 8)
    t1, t2 = torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([[0.0, 1.0, 0.0]])
    assert torch.allclose(film(x, m, t1, region=r), old(x, m, t1, region=r), atol=1e-6)
    with torch.no_grad():
        film.fusion[0].forward = lambda feat, context: feat  # the bottleneck ignores the text
        assert torch.allclose(film(x, m, t1, region=r), film(x, m, t2, region=r))
        film.decoder_film[-1].weight.normal_()
        assert not torch.allclose(film(x, m, t1, region=r), film(x, m, t2, region=r))
        tokens = torch.stack([t1, t1], dim=1)  # (B, L, d): averaged over the tokens
        assert torch.allclose(film(x, m, tokens, region=r), film(x, m, t1, region=r), atol=1e-6)


def test_a_run_recorded_before_a_network_option_existed_resumes_at_its_default() -> None:
    from omegaconf import OmegaConf

    from neurorefiner.training.refiner import module_defaults

    cfg = OmegaConf.create({"model": {"_target_": "neurorefiner.models.refine_module.TopoRefineModule",
                                      "net": {"_target_": "neurorefiner.models.toporefinenet.TopoRefineNet"}}})
    defaults = module_defaults(cfg)
    assert defaults["model.net.text_film"] is False and defaults["model.net.region_channel"] is False
    assert defaults["model.negative_weight"] == 0.0


def test_edit_gate_only_takes_changes_back_and_starts_open(tmp_path):
    """edit_gate: closed, the output is the input mask; open, the network's own output; never a change the
    network did not propose. Weights saved without it load with the gate open."""
    from neurorefiner.models.toporefinenet import gated_logits
    from neurorefiner.training.refiner import load_net_weights

    torch.manual_seed(0)
    logits = torch.randn(2, 2, 4, 8, 8) * 3
    mask = (torch.rand(2, 1, 4, 8, 8) > 0.5).float()
    p = TopoRefineNet.probabilities(logits)
    closed = TopoRefineNet.probabilities(gated_logits(logits, mask, torch.tensor([[-30.0], [-30.0]])))
    assert torch.allclose(closed, mask, atol=1e-4)
    wide = TopoRefineNet.probabilities(gated_logits(logits, mask, torch.tensor([[30.0], [30.0]])))
    assert torch.allclose(wide, p, atol=1e-4)
    half = TopoRefineNet.probabilities(gated_logits(logits, mask, torch.tensor([[0.0], [0.0]])))
    change, half_change = (p - mask).abs(), (half - mask).abs()
    assert torch.allclose(half_change, change / 2, atol=1e-4)

    old = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True).eval()
    path = tmp_path / "old.ckpt"
    torch.save({"state_dict": {f"net.{k}": v for k, v in old.state_dict().items()}}, path)
    gated = TopoRefineNet(channels=(4, 8), text_dim=3, region_channel=True, edit_gate=True).eval()
    load_net_weights(gated, path)
    x, m, r, t = torch.rand(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8), torch.ones(1, 1, 4, 8, 8), torch.rand(1, 3)
    before, after = TopoRefineNet.probabilities(old(x, m, t, region=r)), TopoRefineNet.probabilities(
        gated(x, m, t, region=r))
    assert (after <= before + 1e-6).all() and torch.allclose(after, before, atol=0.01)
    assert gated.last_gate_logit.shape == (1,)


def test_edit_gate_learns_from_its_own_loss() -> None:
    from neurorefiner.models.refine_module import TopoRefineModule

    torch.manual_seed(0)
    net = TopoRefineNet(channels=(4, 8), text_dim=3, edit_gate=True)
    module = TopoRefineModule(net, residual=True, gate_weight=1.0)
    image, mask = torch.rand(2, 1, 4, 8, 8), torch.zeros(2, 1, 4, 8, 8)
    target = mask.clone()
    target[0, 0, 1, 2:5, 2:5] = 1  # the first sample asks for a change, the second for none
    logits = net(image, mask, torch.rand(2, 3))
    with_gate = module._loss(logits, target, mask)
    module.hparams["gate_weight"] = 0.0
    assert float(with_gate) > float(module._loss(logits, target, mask))
    module.hparams["gate_weight"] = 1.0
    with_gate.backward()
    assert net.edit_gate[-1].weight.grad.abs().sum() > 0
