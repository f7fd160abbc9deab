"""The learned 3D refinement baselines (SegFix-, SegRefiner-, Mask Transfiner-style): network shapes, the pieces
each method is made of (offset relabelling, reverse process, octree), whole-volume refinement from a checkpoint and
the errors for bad checkpoint files. Tiny shapes: each test takes well under a few seconds on one thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from neurorefiner.errors import InputError
from neurorefiner.evaluation.refinement_baselines import SegFix, SegRefiner, Transfiner
from neurorefiner.inference.refinement_baselines import BaselineRefiner, load_baseline
from neurorefiner.models.baselines.segfix import SegFixNet3D, mask_boundary, segfix_relabel, segfix_targets
from neurorefiner.models.baselines.segrefiner import SegRefinerNet3D, corrupt, reverse_share, segrefiner_reverse
from neurorefiner.models.baselines.transfiner import TransfinerNet3D, octree_uncertain, transfiner_apply
from neurorefiner.training.refinement_baselines import MODULES

torch.set_num_threads(1)
TINY = {"features": [2, 4], "first_stride": [1, 2, 2]}
METHODS = {"segfix": SegFix, "segrefiner": SegRefiner, "transfiner": Transfiner}
SETTINGS = {"segfix": {"step": 1, "threshold": 0.5}, "segrefiner": {"steps": 3, "threshold": 0.5},
            "transfiner": {"cell": [2, 4, 4], "neighbours": 1, "threshold": 0.5}}


def _nets() -> dict[str, torch.nn.Module]:
    return {"segfix": SegFixNet3D(**TINY), "segrefiner": SegRefinerNet3D(**TINY, time_dim=4),
            "transfiner": TransfinerNet3D(**TINY, hidden=4)}


def _write_ckpt(path: Path, kind: str, net: torch.nn.Module) -> Path:
    config = dict(TINY, **({"time_dim": 4} if kind == "segrefiner" else {"hidden": 4} if kind == "transfiner" else {}))
    torch.save({"format": "test", "kind": kind, "net_config": config, "settings": SETTINGS[kind],
                "train_patch": [4, 8, 8], "state_dict": net.state_dict()}, path)
    return path


def _tube(shape: tuple[int, int, int] = (6, 20, 20)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[2:4, 9:11, 3:17] = True
    return m


# ---------------------------------------------------------------------------------------------- networks
@pytest.mark.parametrize("shape", [(1, 8, 16, 16), (2, 7, 15, 13)], ids=["even", "odd"])
def test_network_output_shapes(shape: tuple[int, ...]) -> None:
    n, d, h, w = shape
    image, mask = torch.rand(n, 1, d, h, w), (torch.rand(n, 1, d, h, w) > 0.7).float()
    nets = _nets()
    assert nets["segfix"].predict(image, mask).shape == (n, 4, d, h, w)
    assert nets["segrefiner"].predict(image, mask, torch.full((n,), 0.5)).shape == (n, 1, d, h, w)
    assert nets["transfiner"].predict(image, mask).shape == (n, 1, d, h, w)


def test_segrefiner_reads_its_timestep() -> None:
    net = SegRefinerNet3D(**TINY, time_dim=4).eval()
    for p in net.time.parameters():
        torch.nn.init.normal_(p)
    image, mask = torch.rand(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8)
    a, b = net.predict(image, mask, torch.tensor([1 / 6])), net.predict(image, mask, torch.tensor([1.0]))
    assert not torch.allclose(a, b)


def test_networks_refuse_wrong_inputs() -> None:
    with pytest.raises(ValueError, match="features"):
        SegFixNet3D(features=[8])
    with pytest.raises(ValueError, match=r"\(N, 1, D, H, W\)"):
        TransfinerNet3D(**TINY).predict(torch.rand(1, 2, 4, 8, 8), torch.rand(1, 2, 4, 8, 8))


# ---------------------------------------------------------------------------------------------- SegFix
def test_segfix_relabels_boundary_voxels_from_where_their_offset_points() -> None:
    mask = np.zeros((3, 3, 6), bool)
    mask[1, 1, 1:4] = True  # a line of three voxels along x
    prob = np.zeros(mask.shape, np.float32)
    direction = np.zeros((3, *mask.shape), np.float32)
    for voxel in [(1, 1, 3), (1, 1, 1), (1, 1, 0)]:  # a fg end, the other fg end, a bg voxel beside it
        prob[voxel] = 1.0
        direction[(2, *voxel)] = 1.0  # all point to +x
    prob[0, 0, 5] = 1.0  # not on the mask boundary: never relabelled, wherever it points
    direction[:, 0, 0, 5] = (1.0, 1.0, -2.0)  # would read (1, 1, 3), which is foreground
    out = segfix_relabel(mask, prob, direction, step=1)
    expected = np.zeros_like(mask)
    expected[1, 1, 0:3] = True  # (1,1,3) read the background at (1,1,4); (1,1,0) read the foreground at (1,1,1)
    np.testing.assert_array_equal(out, expected)
    assert not segfix_relabel(mask, prob * 0.4, direction, step=1).__xor__(mask).any()  # below threshold


def test_segfix_targets_point_into_each_voxels_own_region() -> None:
    gold = np.zeros((9, 9, 9), bool)
    gold[2:7, 2:7, 2:7] = True
    band, direction = segfix_targets(gold, width=2)
    assert band[2, 4, 4] and band[1, 4, 4] and not band[4, 4, 4]  # centre: 3 voxels from background
    assert direction[0, 2, 4, 4] > 0.9  # foreground face voxel -> +z, into the cube
    assert direction[0, 1, 4, 4] < -0.9  # background voxel above it -> -z, away from the cube
    assert np.allclose(direction[:, ~band], 0)
    assert mask_boundary(gold).sum() == 5 ** 3 - 3 ** 3 + 6 * 25
    line = np.zeros((5, 7, 7), bool)
    line[1:4, 2:5, 1:6] = True  # a neurite of 3 x 3 voxels in cross-section
    band, _ = segfix_targets(line, width=2)
    assert band[2, 2, 3] and not band[2, 3, 3]  # the edge rows are boundary, the centre line is its interior


# ---------------------------------------------------------------------------------------------- SegRefiner
def test_segrefiner_reverse_runs_the_configured_steps_and_fixes_confident_voxels_first() -> None:
    coarse = np.zeros((4, 5, 5), bool)
    gold = coarse.copy()
    gold[1:3, 1:4, 1:4] = True
    seen: list[tuple[int, int]] = []

    def predict(x: np.ndarray, t: int) -> np.ndarray:
        seen.append((t, int((x != coarse).sum())))
        return np.where(gold, 0.9, 0.0).astype(np.float32)  # background voxels are the most confident

    out, calls = segrefiner_reverse(predict, coarse, steps=6)
    assert calls == 6 and [t for t, _ in seen] == [6, 5, 4, 3, 2, 1]
    np.testing.assert_array_equal(out, gold)
    assert seen[1][1] == 0  # the first step fixed the confident background: the mask has not changed yet
    assert reverse_share(6, 6) == pytest.approx(1 / 6) and reverse_share(1, 6) == pytest.approx(1.0)


def test_corrupt_goes_from_gold_to_coarse() -> None:
    gold, coarse = torch.ones(1, 1, 4, 8, 8), torch.zeros(1, 1, 4, 8, 8)
    assert torch.equal(corrupt(gold, coarse, torch.tensor([0]), 6), gold)
    assert torch.equal(corrupt(gold, coarse, torch.tensor([6]), 6), coarse)
    mid = corrupt(gold, coarse, torch.tensor([3]), 6, torch.Generator().manual_seed(0)).mean().item()
    assert 0.4 < mid < 0.6


def test_segrefiner_whole_volume_runs_the_configured_number_of_steps(tmp_path: Path) -> None:
    path = _write_ckpt(tmp_path / "segrefiner.ckpt", "segrefiner", _nets()["segrefiner"])
    refiner = BaselineRefiner.load("segrefiner", path, steps=4)
    refiner.refine(np.random.default_rng(0).random((6, 20, 20), dtype=np.float32), _tube())
    assert refiner.last_calls == 4


# ---------------------------------------------------------------------------------------------- Transfiner
def test_octree_selects_incoherent_cells_only() -> None:
    mask = np.zeros((8, 32, 32), bool)
    mask[:, 5:19, 5:19] = True  # a slab: its faces cut cells, its inside and the far background do not
    sel = octree_uncertain(mask, cell=(2, 8, 8), neighbours=0)
    assert sel.any()
    cells = sel.reshape(8, 1, 8, 4, 8, 4).any(axis=(1, 3, 5))  # level-2 cells (1, 4, 4)
    counts = mask.reshape(8, 1, 8, 4, 8, 4).sum(axis=(1, 3, 5))
    assert np.all((counts[cells] > 0) & (counts[cells] < 16))  # every selected cell is mixed
    assert cells.sum() == ((counts > 0) & (counts < 16)).sum()  # and every mixed one is selected
    assert not sel[:, 10:14, 10:14].any() and not sel[:, 26:, 26:].any()  # deep inside / far outside
    grown = octree_uncertain(mask, cell=(2, 8, 8), neighbours=1)
    assert (grown & ~sel).any() and not (sel & ~grown).any() and not grown[:, 28:, 28:].any()
    assert not octree_uncertain(np.zeros((4, 16, 16), bool)).any()
    assert not octree_uncertain(np.ones((4, 16, 16), bool)).any()


def test_transfiner_changes_uncertain_voxels_only() -> None:
    mask = _tube()
    sel = octree_uncertain(mask, cell=(2, 4, 4))
    out = transfiner_apply(mask, np.ones(mask.shape, np.float32), sel)
    assert (out[sel]).all() and np.array_equal(out[~sel], mask[~sel])


# ---------------------------------------------------------------------------------------------- methods
@pytest.mark.parametrize("kind", sorted(METHODS))
def test_method_refines_a_tiny_volume_from_a_checkpoint(kind: str, tmp_path: Path) -> None:
    path = _write_ckpt(tmp_path / f"{kind}.ckpt", kind, _nets()[kind])
    method = METHODS[kind](checkpoint=str(path), patch_size=[4, 8, 8])
    image = np.random.default_rng(1).random((6, 20, 20), dtype=np.float32)
    mask = _tube()
    out = method(image, mask, case=None, spacing=(1.0, 1.0, 1.0))
    assert out.dtype == bool and out.shape == mask.shape
    assert method.last_info["network_passes"] == (3 if kind == "segrefiner" else 1)
    assert not method(image, np.zeros_like(mask), case=None).any()  # an empty mask stays empty


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_training_module_loss_and_refine(kind: str) -> None:
    module = MODULES[kind](net=_nets()[kind], **SETTINGS[kind] if kind != "segfix" else {})
    tube = torch.from_numpy(_tube((4, 8, 8))[None, None]).float().repeat(2, 1, 1, 1, 1)
    batch = {"image": torch.rand(2, 1, 4, 8, 8), "mask": tube.clone(), "target": tube}
    batch["mask"][:, :, :, :, 5:] = 0  # a break
    loss = module.loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and any(p.grad is not None for p in module.net.parameters())
    out = module.refine(batch["image"], batch["mask"])
    assert out.shape == batch["mask"].shape and out.dtype == torch.bool


# ---------------------------------------------------------------------------------------------- bad files
def test_missing_corrupt_or_foreign_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.ckpt"
    with pytest.raises(InputError, match="nope.ckpt.*not found"):
        load_baseline("segfix", missing)
    corrupt_file = tmp_path / "corrupt.ckpt"
    corrupt_file.write_bytes(b"this is not a checkpoint")
    with pytest.raises(InputError, match="corrupt.ckpt"):
        load_baseline("transfiner", corrupt_file)
    other = _write_ckpt(tmp_path / "other.ckpt", "segfix", _nets()["segfix"])
    with pytest.raises(InputError, match=r"other.ckpt.*'segfix' baseline, not 'segrefiner'"):
        load_baseline("segrefiner", other)
    torch.save({"kind": "segfix", "net_config": {"features": [4, 8]}, "state_dict": _nets()["segfix"].state_dict()},
               tmp_path / "misfit.ckpt")
    with pytest.raises(InputError, match="misfit.ckpt.*does not fit"):
        load_baseline("segfix", tmp_path / "misfit.ckpt")
    with pytest.raises(InputError, match="nope.ckpt"):
        SegFix(checkpoint=str(missing))(np.zeros((4, 8, 8), np.float32), np.ones((4, 8, 8), bool), case=None)


def test_transfiner_mask_prior_starts_from_the_coarse_mask() -> None:
    net = TransfinerNet3D(**TINY, hidden=4, mask_prior=3.0)
    torch.nn.init.zeros_(net.head[-1].weight)
    torch.nn.init.zeros_(net.head[-1].bias)
    mask = torch.from_numpy(_tube((4, 8, 8))[None, None]).float()
    logits = net.predict(torch.rand(1, 1, 4, 8, 8), mask)
    assert torch.equal(logits > 0, mask > 0)
