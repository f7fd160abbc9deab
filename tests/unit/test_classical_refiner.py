"""The classical refiner drops specks and joins fragments to the main piece along the bright path, and
nothing across long gaps."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.baselines.classical import brightest_path, classical_refine


def _broken_fibre(gap: int = 6) -> tuple[np.ndarray, np.ndarray]:
    """A bright fibre along x with a gap in the mask (the image keeps the signal), plus a speck."""
    image = np.zeros((9, 24, 80), np.float32)
    image[4, 12, 5:75] = 1.0
    mask = np.zeros(image.shape, bool)
    mask[3:6, 11:14, 5:35] = True
    mask[3:6, 11:14, 35 + gap:75] = True
    mask[1, 2, 2] = True  # speck
    return image, mask


def test_drops_specks_and_bridges_a_short_gap_along_the_signal() -> None:
    import cc3d

    image, mask = _broken_fibre(gap=6)
    out = classical_refine(image, mask, min_size=10, max_gap=10)
    assert not out[1, 2, 2]
    assert cc3d.connected_components(out, connectivity=26).max() == 1
    assert out[4, 12, 35:41].all()  # the bridge runs on the bright row
    assert (out & ~mask).sum() < 60  # a thin bridge, not a blob


def test_leaves_fragments_beyond_the_gap_alone() -> None:
    image, mask = _broken_fibre(gap=15)
    out = classical_refine(image, mask, min_size=10, max_gap=10)
    assert not (out & ~mask).any()
    assert out[4, 12, 60]  # the far piece is kept, not removed


def test_anisotropic_spacing_measures_the_gap_in_finest_axis_voxels() -> None:
    image, mask = _broken_fibre(gap=6)
    # gap of 7 voxels along x at 0.33 um is short; spacing is normalised by the finest axis
    out = classical_refine(image, mask, spacing=(1.0, 0.33, 0.33), min_size=10, max_gap=10)
    assert out[4, 12, 35:41].all()


def test_brightest_path_follows_the_bright_detour() -> None:
    image = np.zeros((1, 11, 11), np.float32)
    image[0, 0, :] = image[0, :, 10] = 1.0  # an L along the border
    path = brightest_path(image, (0, 0, 0), (0, 10, 10), margin=0)
    assert all(image[tuple(p)] == 1.0 for p in path)


@pytest.mark.parametrize("kwargs", [{"min_size": -1}, {"max_gap": -2.0}, {"spacing": (1.0, 0.0, 1.0)}])
def test_bad_arguments_raise(kwargs: dict) -> None:
    image, mask = _broken_fibre()
    with pytest.raises(ValueError):
        classical_refine(image, mask, **kwargs)


def test_empty_mask_stays_empty() -> None:
    image, mask = _broken_fibre()
    assert not classical_refine(image, np.zeros_like(mask)).any()


def test_a_judged_bridge_is_made_vetoed_or_put_off_to_the_next_pass() -> None:
    """The verdict of ``judged``: True bridges, False leaves the piece apart for good, None waits for the next pass,
    whose verdict sees the tree as it has grown (a chain: B joins the tree, then C joins B)."""
    import cc3d

    image = np.zeros((9, 24, 80), np.float32)
    image[4, 12, 5:78] = 1.0
    mask = np.zeros(image.shape, bool)
    mask[3:6, 11:14, 5:35] = True     # the tree
    mask[3:6, 11:14, 41:60] = True    # B, larger: bridged first
    mask[3:6, 11:14, 66:76] = True    # C, within reach of B only
    root = (4, 12, 6)
    plain = classical_refine(image, mask, min_size=5, max_gap=10, root=root)
    asked: list[int] = []

    def to_the_tree_as_it_stood(current: np.ndarray):  # type: ignore[no-untyped-def]
        labels = cc3d.connected_components(current, connectivity=26)
        asked.append(int(current.sum()))
        return lambda a, b: True if labels[tuple(b)] == labels[root] else None

    later = classical_refine(image, mask, min_size=5, max_gap=10, root=root, judged=to_the_tree_as_it_stood)
    assert np.array_equal(later, plain) and len(asked) == 2
    assert cc3d.connected_components(later, connectivity=26).max() == 1
    vetoed = classical_refine(image, mask, min_size=5, max_gap=10, root=root, judged=lambda m: lambda a, b: False)
    assert np.array_equal(vetoed, mask)
    asked.clear()
    once = classical_refine(image, mask, min_size=5, max_gap=10, root=root, passes=1, judged=to_the_tree_as_it_stood)
    assert cc3d.connected_components(once, connectivity=26).max() == 2 and len(asked) == 1
