"""Stage-1 defects: breaks really break, FP adds only background, the instruction names the defect."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents import Instruction, parse_instruction
from neurorefiner.defects import (
    add_noise_blobs,
    betti0,
    cut_break,
    describe_change,
    make_break,
    make_defect,
    paste_annotation,
    paste_touching_fibre,
)
from neurorefiner.defects.generate import DEFECT_KINDS, DefectConfig, draw_kind
from neurorefiner.defects.touch import contact_voxels, farthest_along
from neurorefiner.io.swc import Tree

SHAPE = (32, 64, 64)


def y_neuron(shape=SHAPE) -> np.ndarray:
    """A Y-shaped neurite (radius 1.5) across a block: one component."""
    zyx = np.array([[16, 5, 5], [16, 32, 32], [10, 58, 10], [22, 60, 58]], float)
    return Tree.from_points(zyx, np.array([-1, 0, 1, 1]), radius=1.5).rasterize(shape)


def straight_neuron(shape=SHAPE) -> np.ndarray:
    zyx = np.array([[16, 32, 2], [16, 32, 61]], float)  # along x through the middle
    return Tree.from_points(zyx, np.array([-1, 0]), radius=1.5).rasterize(shape)


def test_fixture_is_one_component():
    assert betti0(y_neuron()) == 1
    assert betti0(np.zeros(SHAPE, bool)) == 0


def test_cut_break_removes_only_inside_the_cube():
    gold = straight_neuron()
    cut = cut_break(gold, np.array([16, 32, 32]), k=9)
    changed = gold & ~cut
    assert not (cut & ~gold).any()  # only removes
    zz, yy, xx = np.nonzero(changed)
    assert xx.min() >= 32 - 4 and xx.max() <= 32 + 4
    assert betti0(cut) == 2


def test_cut_break_keeps_the_core_of_thick_structures():
    blob = np.zeros(SHAPE, bool)
    blob[4:28, 10:54, 10:54] = True  # much thicker than the kernel: erosion only nibbles
    cut = cut_break(blob, np.array([16, 32, 32]), k=7)
    assert cut[16, 32, 32]
    assert (blob & ~cut).sum() == 0  # interior of a thick body survives a local erosion


@pytest.mark.parametrize("seed", range(8))
def test_make_break_increases_betti0_with_kernel_in_range(seed):
    gold = y_neuron()
    rng = np.random.default_rng(seed)
    d = make_break(gold, rng)
    assert d is not None and d.kind == "break"
    assert betti0(d.mask) > betti0(d.target) == 1
    assert (d.target == gold).all() and not (d.mask & ~gold).any()
    assert (d.changed == (gold & ~d.mask)).all() and d.changed.any()
    ext = np.ptp(np.argwhere(d.changed), axis=0) + 1
    assert (ext <= 20).all()  # cut inside a cube of side k <= 20
    assert d.instruction.op in ("connect", "repair")


def test_make_break_gives_up_where_nothing_can_break():
    blob = np.zeros(SHAPE, bool)
    blob[4:28, 10:54, 10:54] = True
    assert make_break(blob, np.random.default_rng(0), max_tries=5) is None
    assert make_break(np.zeros(SHAPE, bool), np.random.default_rng(0)) is None
    with pytest.raises(ValueError):
        make_break(y_neuron(), np.random.default_rng(0), k_range=(10, 5))


def test_connect_vs_repair_by_gap_length():
    gold = straight_neuron()
    # x cells of a 64-wide block are [0, 21), [21, 43), [43, 64)
    short = gold & ~cut_break(gold, np.array([16, 32, 32]), k=5)
    assert describe_change(short, "fn").op == "repair"
    long_cut = gold & ~cut_break(gold, np.array([16, 32, 21]), k=19)  # x 12..30: crosses the boundary
    ins = describe_change(long_cut, "fn", long_gap=10)
    assert ins == Instruction("connect", "center-left-center", "center-center-center")
    assert describe_change(long_cut, "fn", long_gap=100).op == "repair"  # threshold decides


def test_describe_change_fp_and_errors():
    m = np.zeros(SHAPE, bool)
    m[28:31, 2:5, 60:63] = True
    assert describe_change(m, "fp") == Instruction("remove", "top-right-rear")
    line = np.zeros(SHAPE, bool)
    line[2, 60, 2:62] = True  # a long streak along x at the bottom-front
    ins = describe_change(line, "fp")
    assert ins == Instruction("remove", "bottom-left-front", "bottom-right-front")
    with pytest.raises(ValueError):
        describe_change(np.zeros(SHAPE, bool), "fp")
    with pytest.raises(ValueError):
        describe_change(m, "other")


@pytest.mark.parametrize("seed", range(6))
def test_paste_adds_foreign_annotation_in_background(seed):
    gold = y_neuron()
    other = straight_neuron()
    d = paste_annotation(gold, np.random.default_rng(seed), [other])
    assert d is not None and d.kind == "paste"
    assert (d.target == gold).all()
    assert not (gold & ~d.mask).any()  # nothing removed
    assert (d.changed == (d.mask & ~gold)).all() and d.changed.sum() >= 15
    assert d.instruction.op == "remove"
    assert np.ptp(np.argwhere(d.changed), axis=0).max() < 24  # local region


@pytest.mark.parametrize("seed", range(6))
def test_noise_blobs_are_local_and_named(seed):
    gold = y_neuron()
    d = add_noise_blobs(gold, np.random.default_rng(seed))
    assert d is not None and d.kind == "noise"
    assert not (gold & ~d.mask).any() and d.changed.sum() >= 10
    assert d.instruction.op == "remove"


def test_instruction_region_covers_the_defect():
    """Over many draws, most changed voxels lie in the region the instruction names."""
    gold = y_neuron()
    rng = np.random.default_rng(1)
    inside = total = 0
    kinds = set()
    for _ in range(60):
        d = make_defect(gold, rng, sources=[straight_neuron()])
        if d is None:
            continue
        kinds.add(d.kind)
        region = d.instruction.region(SHAPE)
        inside += int((d.changed & region).sum())
        total += int(d.changed.sum())
        assert parse_instruction(d.instruction.format()) == d.instruction
    assert kinds == {"break", "paste", "noise"}
    assert inside / total > 0.8


def test_same_seed_same_defect():
    gold = y_neuron()
    a = make_defect(gold, np.random.default_rng(7))
    b = make_defect(gold, np.random.default_rng(7))
    assert a.kind == b.kind and a.instruction == b.instruction and (a.mask == b.mask).all()


def test_kind_probabilities_and_config_errors():
    gold = y_neuron()
    rng = np.random.default_rng(0)
    cfg = {"probs": {"break": 0.0, "paste": 0.0, "noise": 1.0}}
    assert {make_defect(gold, rng, cfg).kind for _ in range(10)} == {"noise"}
    with pytest.raises(ValueError):
        DefectConfig.build({"probs": {"tear": 1.0}})
    with pytest.raises(ValueError):
        DefectConfig.build({"probs": {"break": 0.0}})
    with pytest.raises(ValueError):
        DefectConfig.build({"kernel": 3})
    with pytest.raises(ValueError):
        make_defect(gold, rng, kind="tear")


@pytest.mark.parametrize("seed", range(8))
def test_touch_pastes_a_fibre_merged_into_the_neuron(seed):
    """One component with the neuron, mostly outside it, undone by removing the changed voxels, and named
    "Remove noise from <tip> to <junction>" with the tip in the start cell and the contact in the end cell."""
    gold = y_neuron()
    source = straight_neuron() if seed % 2 else gold  # another neuron, or the block's own mask moved
    d = paste_touching_fibre(gold, np.random.default_rng(seed), [source])
    assert d is not None and d.kind == "touch"
    assert betti0(d.mask) == betti0(gold) == 1  # merged into the neuron, not a loose piece
    assert betti0(d.changed) == 1 and d.changed.sum() >= 15
    assert (d.changed == (d.mask & ~gold)).all() and not (gold & ~d.mask).any()
    assert (d.target == gold).all() and ((d.mask & ~d.changed) == gold).all()  # gold = defect minus changed
    ins = parse_instruction(d.instruction.format())
    assert ins == d.instruction and ins.op == "remove" and len(ins.positions) == 2 and ins.start != ins.end
    assert d.instruction.format().startswith("Remove noise from ")
    contact = contact_voxels(d.changed, gold)
    tip = farthest_along(d.changed, contact)
    assert d.instruction.start.region(SHAPE)[tuple(tip)]  # start = the tip's cell
    assert d.instruction.end.region(SHAPE)[tuple(contact.T)].any()  # end = where it touches the neuron
    assert np.linalg.norm(contact - contact.mean(axis=0), axis=1).max() <= 10  # touches at one end only


def test_touch_is_the_attached_branch_the_editor_cuts():
    """On most draws the editor's cut for "Remove noise from <tip> to <junction>" takes the pasted fibre off
    and leaves the neuron (a gold branch ending in the same cells can make the cut ambiguous)."""
    from neurorefiner.inference.branch_cut import cut_branch

    gold = y_neuron()
    clean = 0
    for seed in range(8):
        d = paste_touching_fibre(gold, np.random.default_rng(seed), [straight_neuron()])
        out, _ = cut_branch(d.mask, d.instruction)
        clean += (d.changed & ~out).sum() > 0.5 * d.changed.sum() and (gold & ~out).sum() < 0.02 * gold.sum()
    assert clean >= 5


def test_touch_gives_up_without_a_neuron_or_a_fibre():
    rng = np.random.default_rng(0)
    assert paste_touching_fibre(np.zeros(SHAPE, bool), rng, [straight_neuron()]) is None
    assert paste_touching_fibre(y_neuron(), rng, [np.zeros(SHAPE, bool)]) is None
    speck = np.zeros(SHAPE, bool)
    speck[16, 30:33, 30:33] = True  # no fibre in it: too short and too small
    assert paste_touching_fibre(y_neuron(), rng, [speck], max_tries=5) is None


def test_touch_is_off_by_default_and_drawn_when_asked():
    """touch is a known kind with probability 0 in the defaults, so the shipped configs draw as before."""
    assert "touch" in DEFECT_KINDS and DefectConfig().probs["touch"] == 0.0
    old = DefectConfig(probs={"break": 0.5, "paste": 0.25, "noise": 0.25})
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    draws = [draw_kind(a, DefectConfig()) for _ in range(500)]
    assert draws == [draw_kind(b, old) for _ in range(500)] and "touch" not in draws
    gold, rng = y_neuron(), np.random.default_rng(2)
    off = {"probs": {"break": 0.4, "paste": 0.3, "noise": 0.3, "touch": 0.0}}
    assert "touch" not in {make_defect(gold, rng, off, sources=[straight_neuron()]).kind for _ in range(30)}
    on = {"probs": {"break": 0.0, "paste": 0.0, "noise": 0.0, "touch": 1.0}, "touch_size_range": [16, 30]}
    d = make_defect(gold, rng, on, sources=[straight_neuron()])
    assert d is not None and d.kind == "touch"
