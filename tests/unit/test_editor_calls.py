"""The editor-call audit puts a refusal where it happens: gold, network, decoding or Validator."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.learned.roles import LearnedInspector
from neurorefiner.inference.decoding import EditResult
from neurorefiner.studies.editor_calls import audit_case, reason_kind, summary_rows
from tests.unit.test_learned_agents import SPACING, always, cut_tube, gold_along_tube


class KeepEverything:
    """A stand-in editor whose network marks every voxel foreground, decoded to 'nothing removed'."""

    threshold = 0.5

    def probabilities(self, img, msk, ins, crop=True):  # type: ignore[no-untyped-def]
        return np.ones(np.shape(msk), np.float32)

    def edit_result(self, img, msk, ins, context=None):  # type: ignore[no-untyped-def]
        msk = np.asarray(msk, bool)
        return EditResult(msk.copy(), False, "nothing removed: 2 isolated piece(s) at the named place, but the "
                                             "network marks them foreground", op=ins.op)


def test_each_step_of_a_refused_removal_is_recorded_against_gold() -> None:
    image, mask = cut_tube(12)
    mask = mask.copy()
    mask[2:4, 15:17, 10:12] = True           # two specks off the gold, near each other: one grouped removal
    mask[2:4, 17:19, 16:18] = True
    rng = np.random.default_rng(0)
    inspector = LearnedInspector(judge=always({"join": 0.9, "remove": 0.9, "prune": 0.1}), prune=False)
    rows = audit_case(image, mask, SPACING, gold_along_tube(), inspector, KeepEverything(), 5, rng, block_size=128)
    removal = [r for r in rows if r["kind"] == "remove"]
    assert len(removal) == 1 and removal[0]["pieces"] == 2
    assert removal[0]["gold_right"] == 2                   # gold: both specks are noise, the judge is right
    assert removal[0]["network_share"] == 0.0              # the network keeps every piece voxel
    assert removal[0]["decoding"] == "kept: the network marks them foreground" and not removal[0]["accepted"]
    summary = {s["kind"]: s for s in summary_rows(rows)}
    assert summary["remove"]["gold right %"] == 100.0 and summary["remove"]["network agrees %"] == 0.0
    assert summary["remove"]["decoding changed %"] == 0.0


def test_reasons_are_read_into_few_kinds() -> None:
    assert reason_kind(True, "removed 2 piece(s)") == "changed the mask"
    why = "nothing removed: 1 isolated piece(s) at the named place, but the image shows them (brightness ...)"
    assert reason_kind(False, why) == "kept: the image shows the pieces (brightness gate)"


def test_decoding_overrides_are_read_as_numbers() -> None:
    import pytest

    from neurorefiner.cli.study.editor_calls import parse_overrides
    from neurorefiner.errors import InputError

    assert parse_overrides(["max_brightness=1.0", "network_fill=false", "x=abc"]) == {
        "max_brightness": 1.0, "network_fill": False, "x": "abc"}
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_overrides(["max_brightness"])


def test_a_join_that_attaches_a_false_piece_is_labelled_wrong_when_asked() -> None:
    """``LabelSettings.join_piece``: a join through a gap on the gold is right only if the piece it attaches is
    neuron too; off (None), the gap alone decides, as every shipped judge was trained."""
    from neurorefiner.adaptation.judge.gold_labels import GoldIndex, LabelSettings, attached_piece_labels, label_all
    from neurorefiner.agents.candidates import find_candidates

    image, mask = cut_tube(12)
    gold = gold_along_tube(x1=56)                # the gold stops past the gap: the far piece is not neuron
    cands = find_candidates(image, mask, SPACING, None, ("join",))
    on = GoldIndex(gold, SPACING, mask.shape, LabelSettings(join_piece=0.5, scope_margin=60))
    off = GoldIndex(gold, SPACING, mask.shape, LabelSettings(scope_margin=60))
    plain = label_all(cands.candidates, off)
    assert attached_piece_labels(cands.candidates, plain, cands.labels, cands.main, off) == plain
    asked = attached_piece_labels(cands.candidates, label_all(cands.candidates, on), cands.labels, cands.main, on)
    assert any(v == 1 for c, v in zip(cands.candidates, plain) if c.kind == "join")   # the gap is on the gold
    assert all(v != 1 for c, v in zip(cands.candidates, asked) if c.kind == "join")
