"""The instruction grammar: one formatter, one tolerant parser, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents import GRAMMAR, Instruction, InstructionParseError, all_instructions, parse_instruction
from neurorefiner.topology.positions import Position

# the paper's examples (appendix, Refinement Advisor prompt) and what they mean
PAPER_FORMS = [
    ("Connect neuron from top-left-rear to bottom-left-front",
     Instruction("connect", "top-left-rear", "bottom-left-front")),
    ("Repair break at top-right-front", Instruction("repair", "top-right-front")),
    ("Remove isolated noise at right-center-rear", Instruction("remove", "center-right-rear")),
    ("Remove noise from top-left-front to top-right-front",
     Instruction("remove", "top-left-front", "top-right-front")),
]


@pytest.mark.parametrize("text,expected", PAPER_FORMS)
def test_paper_forms_parse(text, expected):
    assert parse_instruction(text) == expected


def test_formatter_writes_the_paper_forms():
    assert Instruction("connect", "top-left-rear", "bottom-left-front").format() == \
        "Connect neuron from top-left-rear to bottom-left-front"
    assert Instruction("repair", "top-right-front").format() == "Repair break at top-right-front"
    # canonical order vertical-horizontal-depth (the paper also writes "right-center-rear")
    assert Instruction("remove", "right-center-rear").format() == "Remove isolated noise at center-right-rear"
    assert Instruction("remove", "top-left-front", "top-right-front").format() == \
        "Remove noise from top-left-front to top-right-front"
    assert str(Instruction("repair", "center")) == "Repair break at center-center-center"


def test_every_instruction_round_trips():
    seen = set()
    for ins in all_instructions():
        text = ins.format()
        assert parse_instruction(text) == ins
        assert parse_instruction(text.upper()) == ins
        assert parse_instruction(text.replace("-", " ")) == ins
        seen.add(text)
    assert len(seen) == 27 + 27 + 2 * 27 * 26


@pytest.mark.parametrize("text,expected", [
    ("connect NEURON from Top-Left-Rear to Bottom-Left-Front", PAPER_FORMS[0][1]),
    ("Connect the neurons located in the top left rear and the bottom left front", PAPER_FORMS[0][1]),
    ("connect neuron from rear-left-top to front-bottom-left", PAPER_FORMS[0][1]),
    ("Connect top-left-rear bottom-left-front", PAPER_FORMS[0][1]),  # split at the clash of axes
    ("Connect neuron between top-left-rear and bottom-left-front.", PAPER_FORMS[0][1]),
    ("repair the break at Top Right Front", PAPER_FORMS[1][1]),
    ("Repair break at upper-right-anterior", PAPER_FORMS[1][1]),
    ("  repair   break   at   front_top_right  ", PAPER_FORMS[1][1]),
    ("Remove artifact/noise at right-center-rear", PAPER_FORMS[2][1]),
    ("Remove artifact at center-right-posterior", PAPER_FORMS[2][1]),
    ("remove the isolated noise located in the right centre back region", PAPER_FORMS[2][1]),
    ("Delete noise from top-left-front to top-right-front", PAPER_FORMS[3][1]),
    ("Repair break at top-left", Instruction("repair", "top-left-center")),  # missing depth = center
    ("Remove isolated noise at center", Instruction("remove", "center-center-center")),
    # the paper's Figure 2 wording: a connection at one place is a repair there
    ("Connect the neurons located in the middle upper posterior region", Instruction("repair", "top-center-rear")),
    ("Connect neuron at top-left-rear", Instruction("repair", "top-left-rear")),
    ("Connect the break in the middle", Instruction("repair", "center-center-center")),
    # a repair with two named ends is the connection between them
    ("Repair break from top-left-rear to bottom-left-front", PAPER_FORMS[0][1]),
])
def test_parser_is_tolerant(text, expected):
    assert parse_instruction(text) == expected


@pytest.mark.parametrize("text,problem", [
    ("", "no operation"),
    ("make it better", "no operation"),
    ("Repair break", "takes 1 position"),
    ("Connect neuron from top-left-rear to bottom-left-front and center", "takes 2 position"),
    ("Repair break at top-left-rear, bottom-left-front and center", "takes 1 position"),
    ("Remove noise at top-left-rear, bottom-left-front and center", "takes 1 or 2 position"),
    ("Remove noise and connect from top-left-rear to bottom-left-front", "more than one operation"),
    ("Repair break at top-lfet-rear", "did you mean 'left'"),
    ("Repair break at top-rigth-rear", "did you mean 'right'"),
    ("Remove noise from A to B", "takes 1 or 2 position"),
])
def test_unreadable_text_raises_with_the_grammar(text, problem):
    with pytest.raises(InstructionParseError) as err:
        parse_instruction(text)
    msg = str(err.value)
    assert problem in msg
    assert GRAMMAR in msg  # the grammar is listed
    assert "Connect neuron from <position> to <position>" in msg
    assert isinstance(err.value, ValueError)


def test_non_string_input():
    with pytest.raises(InstructionParseError):
        parse_instruction(42)  # type: ignore[arg-type]
    ins = Instruction("repair", "top-left-rear")
    assert parse_instruction(ins) is ins
    assert Instruction.parse("Repair break at top-left-rear") == ins


def test_value_validation():
    with pytest.raises(ValueError):
        Instruction("move", "top-left-rear")
    with pytest.raises(ValueError):
        Instruction("connect", "top-left-rear")
    with pytest.raises(ValueError):
        Instruction("repair", "top-left-rear", "bottom-left-rear")
    with pytest.raises(ValueError):
        Instruction("remove", "top-bottom-rear")
    ins = Instruction("CONNECT", Position("top", "left", "rear"), "bottom left front")  # type: ignore[arg-type]
    assert ins.op == "connect" and ins.end == Position("bottom", "left", "front")
    assert hash(ins) == hash(Instruction("connect", "top-left-rear", "bottom-left-front"))


def test_region_of_instructions():
    shape = (30, 60, 60)
    rep = Instruction("repair", "top-left-rear").region(shape)
    assert rep.sum() == 10 * 20 * 20 and rep[29, 0, 0] and not rep[0, 0, 0]
    con = Instruction("connect", "top-left-rear", "bottom-left-front").region(shape)
    assert con.sum() == 30 * 60 * 20  # box spanning both cells: all z, all y, left third of x
    assert con[0, 59, 0] and con[29, 0, 19] and not con[0, 0, 20]


def test_flipped_instruction_names_the_mirrored_region():
    shape = (12, 12, 12)
    ins = Instruction("connect", "top-left-rear", "center-center-front")
    for axes in ([0], [1], [2], [0, 2], [0, 1, 2]):
        flipped = ins.flipped(axes)
        assert (np.flip(ins.region(shape), axis=axes) == flipped.region(shape)).all()
        assert flipped.op == ins.op


def test_opposite_operation():
    assert Instruction("repair", "top-left-rear").opposite() == Instruction("remove", "top-left-rear")
    assert Instruction("connect", "top-left-rear", "bottom-left-front").opposite() == \
        Instruction("remove", "top-left-rear", "bottom-left-front")
    assert Instruction("remove", "center").opposite() == Instruction("repair", "center")
    assert Instruction("remove", "top-left-rear", "top-right-rear").opposite().op == "connect"


@pytest.mark.parametrize("ins", [Instruction("repair", "top-left-rear"), Instruction("remove", "center"),
                                 Instruction("connect", "top-left-rear", "center-left-rear"),
                                 Instruction("remove", "top-left-front", "top-right-front")])
def test_elsewhere_names_a_disjoint_region(ins):
    shape = (30, 60, 60)
    other = ins.elsewhere()
    assert other.op == ins.op and len(other.positions) == len(ins.positions)
    assert not (other.region(shape) & ins.region(shape)).any()
    assert other.elsewhere() != other


def test_elsewhere_far_from_a_corner():
    assert Instruction("repair", "top-left-front").elsewhere() == Instruction("repair", "bottom-right-rear")


def test_parser_fuzz_word_order_case_and_fillers():
    """Random rewrites of every kind of instruction parse back to the same value."""
    rng = np.random.default_rng(0)
    instructions = list(all_instructions())
    fillers = ["the", "isolated", "neuron", "located in the", "region", "artifact/noise"]
    for k in rng.choice(len(instructions), 300, replace=False):
        ins = instructions[int(k)]

        def pos(p):
            words = list(p)
            rng.shuffle(words)
            sep = str(rng.choice(["-", " ", "_", " - "]))
            return sep.join(words)

        verb = {"connect": "Connect", "repair": "Repair break", "remove": "Remove noise"}[ins.op]
        filler = str(rng.choice(fillers))
        if ins.end is None:
            text = f"{verb} at {filler} {pos(ins.start)}"
        else:
            text = f"{verb} from {filler} {pos(ins.start)} to {pos(ins.end)}"
        text = "".join(c.upper() if rng.random() < 0.3 else c for c in text)
        assert parse_instruction(text) == ins, text
