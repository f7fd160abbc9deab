"""Foreground-prior initialisation of a segmenter's output layer (models.segmenters.output_prior)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from neurorefiner.models.segmentation_module import SegmentationModule
from neurorefiner.models.segmenters import build_segmenter
from neurorefiner.models.segmenters.output_prior import find_output_conv, init_foreground_prior

PROBE = (8, 16, 16)


@pytest.mark.parametrize("name, kwargs, head_attr", [
    ("unet3d", {"features": (4, 8, 16)}, "head"),
    ("gbpnet_style", {"features": (4, 8, 16), "context_features": (4, 8), "heads": 2}, "head"),
    ("sgsnet_style", {"features": (4, 8, 16)}, "seg_head"),  # 1-channel auxiliary heads run before it
    ("adtlnet_style", {"features": (4, 8, 16)}, "seg_head"),
])
def test_the_output_layer_is_found_and_starts_at_the_prior(name, kwargs, head_attr):
    torch.manual_seed(0)
    net = build_segmenter(name, **kwargs)
    head = init_foreground_prior(net, 0.02, PROBE)
    assert head is getattr(net, head_attr)
    assert head.bias[0].item() == 0.0
    assert head.bias[1].item() == pytest.approx(math.log(0.02 / 0.98))
    net.eval()
    with torch.no_grad():
        p = net(torch.rand(1, 1, *PROBE)).softmax(1)[:, 1]
    assert 0.002 < p.mean().item() < 0.2  # near the prior, far from the ~0.5 of a fresh head


def test_probing_draws_no_random_numbers_and_keeps_the_training_mode():
    torch.manual_seed(0)
    net = build_segmenter("unet3d", features=(4, 8, 16))
    net.train()
    state = torch.random.get_rng_state()
    init_foreground_prior(net, 0.05, PROBE)
    assert torch.equal(state, torch.random.get_rng_state())  # the training's random stream is not shifted
    assert net.training


def test_a_layer_that_feeds_a_non_linearity_is_refused():
    net = nn.Sequential(nn.Conv3d(1, 2, 1), nn.ReLU())
    with torch.no_grad():
        net[0].bias.fill_(-0.5)  # the ReLU clips some voxels, so the bias does not shift every logit
    with pytest.raises(ValueError, match="not the output layer"):
        find_output_conv(net, PROBE)


def test_a_network_without_a_two_channel_conv_is_refused():
    with pytest.raises(ValueError, match="no two-channel Conv3d"):
        find_output_conv(nn.Sequential(nn.Conv3d(1, 3, 1)), PROBE)


@pytest.mark.parametrize("prior", [0.0, 1.0, -0.1, 1.5])
def test_a_prior_outside_zero_one_is_refused(prior):
    with pytest.raises(ValueError, match="foreground_prior must be in"):
        init_foreground_prior(build_segmenter("unet3d", features=(4, 8, 16)), prior, PROBE)


def test_the_module_sets_the_prior_only_when_asked():
    torch.manual_seed(0)
    plain = SegmentationModule(build_segmenter("unet3d", features=(4, 8, 16)), patch_size=PROBE)
    torch.manual_seed(0)
    primed = SegmentationModule(build_segmenter("unet3d", features=(4, 8, 16)), patch_size=PROBE,
                                foreground_prior=0.02)
    assert primed.net.head.bias[1].item() == pytest.approx(math.log(0.02 / 0.98))
    assert plain.net.head.bias[1].item() != pytest.approx(math.log(0.02 / 0.98))
    assert primed.hparams.foreground_prior == 0.02  # recorded with the checkpoint
    # every other weight is the network's own initialisation
    for (k, a), b in zip(plain.net.state_dict().items(), primed.net.state_dict().values(), strict=True):
        if k != "head.bias":
            assert torch.equal(a, b), k
