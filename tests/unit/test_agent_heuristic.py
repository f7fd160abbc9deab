"""The heuristic roles on hand-made cases: a cut tube, a speck, a clean tree, a blob, borders."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents.editor import frame_around
from neurorefiner.agents.heuristic import HeuristicAdvisor, HeuristicInspector, HeuristicValidator
from neurorefiner.agents.roles import Advice, BlockContext, CallInfo, Defect, Flag, GlobalView, Step
from neurorefiner.topology.blocks import grid_blocks
from neurorefiner.topology.instructions import Instruction

SHAPE = (32, 64, 64)
EDITOR = (32, 64, 64)


def volume_with(mask: np.ndarray, bright: np.ndarray | None = None) -> np.ndarray:
    img = np.full(mask.shape, 0.05, np.float32)
    img[mask if bright is None else bright] = 0.9
    return img


def tube_x(mask: np.ndarray, z: int, y: int, x0: int, x1: int) -> None:
    mask[z - 1: z + 2, y - 1: y + 2, x0:x1] = True


def inspect(mask: np.ndarray, image: np.ndarray, block: int = 64):
    view = GlobalView(0, image, mask, grid_blocks(mask.shape, block))
    return HeuristicInspector().inspect(view)


def context(mask: np.ndarray, image: np.ndarray) -> BlockContext:
    block = grid_blocks(mask.shape, 64)[0]
    return BlockContext(0, block, block.slices, image, mask.copy(), EDITOR)


def advise(mask: np.ndarray, image: np.ndarray) -> tuple[Flag, Defect, Advice]:
    flags = inspect(mask, image).flags
    flag = flags[0]
    defect = flag.defects[0]
    advice = HeuristicAdvisor().advise(context(mask, image), flag, defect, Step(0, 0, 0, 0), [])
    assert advice is not None
    return flag, defect, advice


def test_short_break_is_fn_and_repaired_where_it_is() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 26, 8, 2, 47)
    tube_x(m, 26, 8, 55, 63)
    full = np.zeros(SHAPE, bool)
    tube_x(full, 26, 8, 2, 63)
    flag, defect, advice = advise(m, volume_with(m, full))
    assert flag.kind == "FN" and defect.kind == "FN"
    assert advice.instruction.format() == "Repair break at top-right-rear"


def test_long_break_is_connected_between_its_ends() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 26, 8, 2, 14)
    tube_x(m, 26, 8, 32, 63)
    full = np.zeros(SHAPE, bool)
    tube_x(full, 26, 8, 2, 63)
    _, defect, advice = advise(m, volume_with(m, full))
    assert advice.instruction.format() == "Connect neuron from top-left-rear to top-center-rear"
    assert sorted(a[2] for a in defect.anchors) == [13, 32]


def test_gap_without_signal_is_not_a_break() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 32, 2, 24)
    tube_x(m, 16, 32, 36, 63)
    assert inspect(m, volume_with(m)).flags == {}


def test_speck_is_fp_removed_where_it_is() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 32, 2, 63)
    m[3:5, 55:57, 5:7] = True
    flag, defect, advice = advise(m, volume_with(m))
    assert flag.kind == "FP" and defect.size == 8
    assert advice.instruction.format() == "Remove isolated noise at bottom-left-front"


def test_clean_tree_gives_nothing() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 32, 2, 63)
    m[15:18, 5:33, 30:33] = True     # a branch
    m[4:17, 31:34, 45:48] = True     # another, going up in z
    assert inspect(m, volume_with(m), block=16).flags == {}


def test_piece_crossing_block_borders_is_not_noise_but_a_blob_is() -> None:
    m = np.zeros((16, 96, 96), bool)
    tube_x(m, 8, 48, 0, 96)            # the tree, crosses every border of 32-blocks
    m[7:10, 10:13, 26:40] = True       # an elongated piece across a border: not noise (126 voxels)
    m[4:9, 70:76, 70:76] = True        # a compact blob of 180 voxels: noise
    flags = inspect(m, volume_with(m), block=32).flags
    kinds = [(b, d.kind, d.size) for b, f in flags.items() for d in f.defects]
    assert kinds == [(8, "FP", 180)]


def _validate(before_region: np.ndarray, after_region: np.ndarray, instruction: str,
              defect: Defect | None = None, validator: HeuristicValidator | None = None) -> tuple[bool, str]:
    ctx = BlockContext(0, grid_blocks(SHAPE, 64)[0], tuple(slice(0, n) for n in SHAPE),
                       np.zeros(SHAPE, np.float32), before_region.copy(), EDITOR)
    frame = frame_around((16, 32, 32), EDITOR, SHAPE)
    advice = Advice(Instruction.parse(instruction), frame, CallInfo("test"))
    defect = defect or Defect("FN")
    v = (validator or HeuristicValidator()).validate(ctx, Flag(0, defect.kind), defect, advice,
                                                     before_region[frame.window], after_region[frame.window],
                                                     Step(0, 0, 0, 0))
    return v.accept, v.reason


@pytest.fixture()
def broken() -> tuple[np.ndarray, np.ndarray]:
    before = np.zeros(SHAPE, bool)
    tube_x(before, 26, 8, 2, 47)
    tube_x(before, 26, 8, 55, 63)
    after = before.copy()
    tube_x(after, 26, 8, 47, 55)
    return before, after


def test_validator_accepts_a_compliant_join(broken) -> None:
    before, after = broken
    ok, reason = _validate(before, after, "Repair break at top-right-rear",
                           Defect("FN", ((26, 8, 46), (26, 8, 55))))
    assert ok, reason


def test_a_bridge_reaching_past_the_named_cell_is_at_the_place_within_connect_margin() -> None:
    """The gap x 34-42 lies just left of the named right cell (x >= 42): half the bridge is more than 4
    voxels outside it, all of it within 10 (where the editor looks for a break's ends and paints)."""
    before = np.zeros(SHAPE, bool)
    tube_x(before, 26, 8, 2, 34)
    tube_x(before, 26, 8, 42, 63)
    after = before.copy()
    tube_x(after, 26, 8, 34, 42)
    defect = Defect("FN", ((26, 8, 33), (26, 8, 42)))
    ok, reason = _validate(before, after, "Repair break at top-right-rear", defect)
    assert not ok and "named place" in reason
    ok, reason = _validate(before, after, "Repair break at top-right-rear", defect,
                           HeuristicValidator(connect_margin=10))
    assert ok, reason
    ok, reason = _validate(before, after, "Repair break at bottom-left-front", defect,
                           HeuristicValidator(connect_margin=10))
    assert not ok and "named place" in reason


def test_validator_rejects_a_join_at_another_place(broken) -> None:
    ok, reason = _validate(*broken, "Repair break at bottom-left-front")
    assert not ok and "named place" in reason


def test_validator_rejects_wrong_sign_and_no_change(broken) -> None:
    before, after = broken
    ok, reason = _validate(before, after, "Remove isolated noise at top-right-rear")
    assert not ok and "remove added" in reason
    ok, reason = _validate(before, before, "Repair break at top-right-rear")
    assert not ok and "changed nothing" in reason


def test_validator_rejects_deleting_the_tree() -> None:
    before = np.zeros(SHAPE, bool)
    tube_x(before, 26, 8, 2, 63)
    before[3:5, 55:57, 5:7] = True
    after = before.copy()
    after[:, :, 43:] = False                       # cuts the tree's right end, and the speck stays
    ok, reason = _validate(before, after, "Remove isolated noise at top-right-rear", Defect("FP", ((3, 55, 5),)))
    assert not ok and "large piece" in reason


def test_validator_accepts_removing_the_speck() -> None:
    before = np.zeros(SHAPE, bool)
    tube_x(before, 16, 32, 2, 63)
    before[3:5, 55:57, 5:7] = True
    after = before.copy()
    after[3:5, 55:57, 5:7] = False
    ok, reason = _validate(before, after, "Remove isolated noise at bottom-left-front", Defect("FP", ((3, 55, 5),)))
    assert ok and "denoised" in reason


def test_curved_gap_signal_is_read_along_the_fibre_not_the_straight_line() -> None:
    """A fibre that bows out across its gap: the straight line between the ends is dark, the fibre is
    bright. Read along the brightest path it is a break; on the straight line it was not."""
    from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects

    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 32, 2, 26)
    tube_x(m, 16, 32, 38, 63)
    bright = m.copy()
    bright[15:18, 32:38, 25:28] = True   # aside, across and back: the fibre's way through the gap
    bright[15:18, 35:38, 25:40] = True
    bright[15:18, 32:38, 37:40] = True
    image = volume_with(m, bright)
    found = find_defects(m, image, settings=DetectSettings(gap_max=16))
    assert [d.kind for d in found] == ["FN"]
    straight = find_defects(m, image, settings=DetectSettings(gap_max=16, signal_path=False))
    assert [d.kind for d in straight] == []


def test_short_dim_gap_is_a_break_long_dim_gap_is_not() -> None:
    """The signal bar shrinks with the gap: 3 voxels of dim stack between two facing ends are a break
    the segmenter's threshold cut; 15 voxels of the same dimness are two fibres."""
    from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects

    def pieces(gap: int) -> tuple[np.ndarray, np.ndarray]:
        m = np.zeros(SHAPE, bool)
        tube_x(m, 16, 32, 2, 30)
        tube_x(m, 16, 32, 30 + gap, 63)
        full = np.zeros(SHAPE, bool)
        tube_x(full, 16, 32, 2, 63)
        image = volume_with(m)
        image[full & ~m] = 0.05 + 0.1 * 0.85   # a tenth of the way from background to foreground
        return m, image

    settings = DetectSettings(gap_max=20)
    assert [d.kind for d in find_defects(*pieces(3), settings=settings)] == ["FN"]
    assert find_defects(*pieces(15), settings=settings) == []
    assert find_defects(*pieces(3), settings=DetectSettings(gap_max=20, signal_by_gap=False)) == []


def test_compact_specks_are_never_break_ends_so_noise_is_not_chained_to_the_tree() -> None:
    """Bright compact blobs a few voxels from a fibre's end and from each other: noise, not a broken
    neurite. With ends_not_blobs they are flagged FP and no break joins them; without, they were breaks."""
    from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects

    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 32, 2, 30)
    for k in range(3):                         # 3 x 4 x 4 blobs in a row beyond the fibre's end
        m[15:18, 30:34, 33 + 7 * k: 37 + 7 * k] = True
    haze = m.copy()
    haze[15:18, 30:34, 28:54] = True           # bright between them (blur, background texture)
    image = volume_with(m, haze)
    kinds = sorted(d.kind for d in find_defects(m, image))
    assert kinds == ["FP", "FP", "FP"]
    assert "FN" in {d.kind for d in find_defects(m, image, settings=DetectSettings(ends_not_blobs=False))}


def test_component_voxels_match_a_whole_volume_search() -> None:
    """The Advisor finds a piece's voxels in a growing box: same voxels, same order, as argwhere over all."""
    from neurorefiner.topology.components import component_voxels, label_components

    rng = np.random.default_rng(3)
    m = rng.random((24, 48, 48)) > 0.93
    tube_x(m, 12, 20, 0, 48)  # one piece spanning the volume, beyond the first box
    labels, n = label_components(m)
    sizes = np.bincount(labels.ravel(), minlength=n + 1)
    for seed in [tuple(int(v) for v in p) for p in np.argwhere(m)[::97]] + [(12, 20, 0)]:
        want = np.argwhere(labels == labels[seed])
        got = component_voxels(labels, sizes, seed, radius=2)
        assert np.array_equal(got, want)
    background = tuple(int(v) for v in np.argwhere(~m)[0])
    assert component_voxels(labels, sizes, background).shape == (0, 3)


def test_block_components_are_reused_until_an_edit_is_applied() -> None:
    m = np.zeros(SHAPE, bool)
    tube_x(m, 16, 8, 2, 20)
    tube_x(m, 16, 8, 30, 50)
    ctx = context(m, volume_with(m))
    first = ctx.components()
    assert first[1] == 2 and ctx.components() is first          # one labelling per mask state
    ctx.apply(tuple(slice(None) for _ in SHAPE), m | np.pad(np.ones((3, 3, 10), bool), [(15, 14), (7, 54), (20, 34)]))
    labels, n, sizes = ctx.components()
    assert n == 1 and sizes[1] == int(ctx.mask.sum())           # the applied edit joined the two pieces


def test_pieces_next_to_the_tree_are_examined_whatever_their_size_rank() -> None:
    """A fragment beyond the tree's end is smaller than many pieces elsewhere: with only the largest pieces
    examined its break is never seen; ``near_tree`` adds the pieces within reach of the tree."""
    from dataclasses import replace

    from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects

    m = np.zeros((32, 96, 96), bool)
    tube_x(m, 16, 8, 2, 60)                     # the tree
    tube_x(m, 16, 8, 64, 76)                    # a fragment 3 voxels beyond its end
    for k in range(4):                          # four larger pieces far from both
        tube_x(m, 16, 30 + 15 * k, 2, 40)
    full = m.copy()
    full[15:18, 7:10, 60:64] = True             # the gap is bright in the image
    base = DetectSettings(max_candidates=3, gap_max=10.0)
    assert not [d for d in find_defects(m, volume_with(m, full), settings=base) if d.kind == "FN"]
    found = [d for d in find_defects(m, volume_with(m, full), settings=replace(base, near_tree=4)) if d.kind == "FN"]
    assert len(found) == 1 and {a[2] for a in found[0].anchors} == {59, 64}
