"""The learned Advisor speaks the grammar with places that carry information: frames placed as the editor's
training crops hold their defects, sentences written by the training defects' describer, different kinds and
places in different words."""

from __future__ import annotations

import functools

import numpy as np

from neurorefiner.agents.learned import LearnedAdvisor, LearnedInspector, LearnedValidator
from neurorefiner.agents.learned.judge import Judge
from neurorefiner.agents.loop import Agents, LoopSettings, run_loop
from neurorefiner.agents.roles import BlockContext, Defect, Flag, Step
from neurorefiner.defects.describe import crop_start, describe_branch, describe_join, describe_piece
from neurorefiner.topology.blocks import grid_blocks
from neurorefiner.topology.components import component_voxels
from neurorefiner.topology.positions import cell_index, locate
from tests.unit.test_learned_agents import DecodingEditor

SIZE = (16, 32, 32)


def test_crop_start_is_the_stage1_crops_rule() -> None:
    """Training crops and the Advisor's frames hold a defect by one rule (drawn the same from the same
    generator), so the places the editor is told are drawn from one distribution."""
    from neurorefiner.data.datamodules.stage1 import _crop_start

    for seed in range(20):
        centre = np.random.default_rng(seed).integers(0, 60, 3)
        a = crop_start(centre, (32, 64, 64), (70, 200, 180), np.random.default_rng([seed, 1]))
        b = _crop_start(tuple(int(c) for c in centre), (32, 64, 64), (70, 200, 180), np.random.default_rng([seed, 1]))
        assert a == b


def test_frames_hold_the_centre_away_from_the_border_and_spread_it_over_the_grid() -> None:
    rng = np.random.default_rng(0)
    cells = set()
    for _ in range(3000):
        start = crop_start((100, 100, 100), (32, 64, 64), (300, 300, 300), rng)
        local = np.array([100, 100, 100]) - start
        assert (local >= np.array([8, 16, 16])).all() and (local <= np.array([24, 48, 48])).all()
        cells.add(tuple(cell_index(local[None], (32, 64, 64))[0]))
    assert len(cells) == 27   # every cell of the grid is named for some draw


def test_describers_name_the_cells_the_edit_lies_in() -> None:
    shape = (32, 64, 64)
    long = describe_join((16, 10, 10), (16, 50, 50), shape)
    assert long.op == "connect" and {long.start.format(), long.end.format()} == {"top-left-center",
                                                                                 "bottom-right-center"}
    short = describe_join((4, 8, 50), (4, 8, 54), shape)
    assert short.op == "repair" and short.start.format() == "top-right-front"
    piece = describe_piece(np.argwhere(np.ones((3, 3, 3), bool)) + [26, 50, 2], shape)
    assert piece.op == "remove" and piece.end is None and piece.start.format() == "bottom-left-rear"
    branch = describe_branch((16, 55, 32), (16, 32, 32), shape)
    assert branch is not None and (branch.start.format(), branch.end.format()) == ("bottom-center-center",
                                                                                   "center-center-center")
    assert describe_branch((16, 30, 30), (16, 32, 32), shape) is None


def _context(mask: np.ndarray) -> BlockContext:
    block = grid_blocks(mask.shape, 128, None)[0]
    region = tuple(slice(0, n) for n in mask.shape)
    return BlockContext(0, block, region, mask.astype(np.float32), mask.copy(), (32, 64, 64))


def test_the_advisor_is_deterministic_and_tries_other_frames_after_a_rejection() -> None:
    mask = np.zeros((48, 128, 128), bool)
    mask[23:26, 62:65, 10:56] = mask[23:26, 62:65, 60:118] = True
    ctx = _context(mask)
    defect = Defect("FN", ((24, 63, 55), (24, 63, 60)))
    adv = LearnedAdvisor()
    first = adv.candidates(ctx, defect)
    assert len(first) == 3 and first == LearnedAdvisor().candidates(ctx, defect)
    assert len({repr(f.as_dict()) for _, f in first}) == 3
    for ins, frame in first:   # the gap lies in the named cell of each frame
        mid = frame.to_frame(np.array([[24, 63, 57.5]]))[0]
        assert ins.op == "repair" and ins.start == locate(mid[None], frame.shape)
    other = adv.candidates(ctx, Defect("FN", ((24, 63, 75), (24, 63, 80))))
    assert [f.as_dict() for _, f in other] != [f.as_dict() for _, f in first]


def test_a_removal_names_the_piece_and_an_attached_branch_names_tip_then_junction() -> None:
    mask = np.zeros((48, 128, 128), bool)
    mask[23:26, 62:65, 10:118] = True           # trunk
    mask[23:26, 65:90, 70:73] = True            # attached branch towards the bottom
    mask[10:13, 30:33, 30:33] = True            # a speck
    ctx = _context(mask)
    adv = LearnedAdvisor()
    step = Step(0, 0, 0, 0)
    flag = Flag(0, "FP")
    speck = adv.advise(ctx, flag, Defect("FP", ((11, 31, 31),)), step, [])
    assert speck is not None and speck.instruction.op == "remove"
    inside = speck.frame.to_frame(np.argwhere(mask[10:13, 30:33, 30:33]) + [10, 30, 30])
    assert speck.instruction.start == locate(inside, speck.frame.shape)
    branch = adv.advise(ctx, flag, Defect("FP_ATTACHED", ((24, 89, 71), (24, 64, 71))), step, [])
    assert branch is not None and branch.instruction.op == "remove" and branch.instruction.end is not None
    tip, junction = branch.frame.to_frame(np.array([[24, 89, 71], [24, 64, 71]]))
    assert branch.instruction.start.cell == tuple(cell_index(tip[None], branch.frame.shape)[0])
    assert branch.instruction.end.cell == tuple(cell_index(junction[None], branch.frame.shape)[0])


class Recording(LearnedAdvisor):
    """The learned Advisor, keeping every (defect, advice) it gave."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list = []

    def advise(self, ctx, flag, defect, step, history):  # type: ignore[no-untyped-def]
        voxels = np.asarray(defect.anchors, float) - ctx.origin
        if defect.kind == "FP":   # the piece the removal names, as it is when the advice is given
            labels, _, sizes = ctx.components()
            voxels = component_voxels(labels, sizes, tuple(int(v) for v in voxels[0]))
        advice = super().advise(ctx, flag, defect, step, history)
        if advice is not None:
            self.said.append((defect, advice, advice.frame.to_frame(voxels)))
        return advice


class BreaksAndSpecks(Judge):
    """Passes every join and the removal of every small piece (the specks, not the fibres' halves)."""

    def __init__(self) -> None:
        super().__init__({}, {"join": 0.5, "remove": 0.5, "prune": 0.5})

    def probabilities(self, candidates, *_):  # type: ignore[no-untyped-def]
        return np.array([0.9 if c.kind == "join" or (c.kind == "remove" and len(c.voxels) < 50) else 0.1
                         for c in candidates])


def breaks_and_specks() -> tuple[np.ndarray, np.ndarray]:
    """A tree (a trunk along y, six fibres along x leaving it), each fibre with a short cut at a different
    place, and six specks, on a bright-fibre image."""
    shape = (64, 160, 256)
    mask = np.zeros(shape, bool)
    rng = np.random.default_rng(3)
    mask[31:34, 10:150, 4:7] = True
    for i in range(6):
        y = 12 + 26 * i
        mask[31:34, y - 1:y + 2, 4:252] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    for i in range(6):
        y, x = 12 + 26 * i, int(rng.integers(40, 210))
        mask[31:34, y - 1:y + 2, x:x + 8] = False
    for i in range(6):
        z, y, x = 20 + 5 * i, 24 + 26 * i, 30 + 38 * i
        mask[z:z + 2, y:y + 2, x:x + 2] = True
    return image, mask


@functools.lru_cache(maxsize=1)
def learned_run() -> tuple:
    """The learned agents on :func:`breaks_and_specks` with the topology decoding as editor: the advisor's
    (defect, advice, voxels the edit changes in its frame), the trace records, the input and the result."""
    image, mask = breaks_and_specks()
    advisor = Recording()
    agents = Agents(LearnedInspector(judge=BreaksAndSpecks()), advisor, LearnedValidator(connect_margin=10))
    records: list[dict] = []
    result = run_loop(image, mask, agents, DecodingEditor(), LoopSettings(t_max=2, editor_size=(32, 64, 64)),
                      (1.0, 0.5, 0.5), emit=records.append)
    return advisor.said, records, image, mask, result


def test_in_a_refine_run_no_two_edits_of_different_kind_or_place_share_a_sentence() -> None:
    """The learned agents on six breaks and six specks, each at its own place: every sentence names the cells
    of its frame where the edit lies (so a sentence is shared only by edits of one kind at one place of their
    frames), and the sentences differ from edit to edit, where a frame centred on each edit gave one sentence
    per kind."""
    said = learned_run()[0]
    kinds = {d.kind for d, _, _ in said}
    assert {"FN", "FP"} <= kinds and len(said) >= 10
    place: dict[str, tuple] = {}
    for defect, advice, voxels in said:
        ins, frame = advice.instruction, advice.frame
        named = {p.cell for p in ins.positions}
        inside = np.clip(voxels, 0, np.array(frame.shape) - 1)
        if defect.kind == "FN":   # the two ends, or the cell of the gap between them
            cells = {tuple(c) for c in cell_index(inside, frame.shape)}
            assert ins.op in ("connect", "repair")
            assert named <= cells | {locate(inside.mean(axis=0)[None], frame.shape).cell}
        else:                     # the cell holding most of the piece, or two cells it spans
            assert ins.op == "remove"
            cells = {tuple(c) for c in cell_index(inside, frame.shape)}
            assert named == {locate(inside, frame.shape).cell} if ins.end is None else named <= cells
        key = (defect.kind, frozenset(named))
        assert place.setdefault(ins.format(), key) == key, f"{ins.format()} said of two kinds or places"
    sentences = {a.instruction.format() for _, a, _ in said}
    assert len(sentences) >= 0.7 * len({(d.kind, d.anchors) for d, _, _ in said})


def test_the_report_and_the_review_show_the_sentence_each_edit_was_given() -> None:
    """report.html and the review's list of tries read each try's own sentence from the trace (what the editor
    was told), never the loop's generic sentence of the roles=none ablation."""
    from neurorefiner.refine.report import build_report
    from neurorefiner.review.history import edit_tries

    said, records, image, mask, result = learned_run()
    sentences = [a.instruction.format() for _, a, _ in said]
    tries = edit_tries(records)
    assert sorted(t.instruction for t in tries) == sorted(sentences)
    page = build_report(records, image, mask, result.mask, grid_blocks(mask.shape, 128, None), {})
    for sentence in set(sentences):
        assert sentence in page
    generic = "Repair break at center-center-center"
    assert (generic in page) == (generic in sentences)
