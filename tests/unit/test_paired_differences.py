"""Every refinement row of Tables 1-2 and the DIADEM table carries its paired difference to the initial masks and
to the classical refiner: the mean per-volume difference, a 95 % percentile bootstrap interval over the volumes
(fixed seed) and the count of volumes better / worse, volumes matched by case name."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.evaluation.doc_tables import parse_spec, render
from neurorefiner.evaluation.paper_tables import collect, paired_columns, paired_refs, write_paper_table
from neurorefiner.evaluation.tables import PairedDiff, paired_difference


def _cases(values) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {f"v{i:02d}": float(v) for i, v in enumerate(values)}


def test_the_interval_covers_the_known_mean_and_the_seed_fixes_it() -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.4, 0.8, 40)
    a, b = _cases(base + 0.03 + rng.normal(0, 0.02, 40)), _cases(base)
    p = paired_difference(a, b)
    truth = float(np.mean([a[c] - b[c] for c in a]))
    assert p.n == 40 and p.mean == pytest.approx(truth)
    assert p.lo < 0.03 < p.hi and p.lo < p.mean < p.hi and p.hi - p.lo < 0.03  # covers the shift it was made with
    assert paired_difference(a, b) == p  # the same seed: the same interval
    assert paired_difference(dict(reversed(list(a.items()))), b) == p  # the order the volumes come in: no matter
    other = paired_difference(a, b, seed=1)
    assert other.mean == p.mean and (other.lo, other.hi) != (p.lo, p.hi)
    # every volume moved by the same amount: no spread, the interval is that amount
    flat = paired_difference(_cases([0.5, 0.6, 0.7]), _cases([0.4, 0.5, 0.6]), n_boot=200)
    assert flat.lo == pytest.approx(0.1) and flat.hi == pytest.approx(0.1)


def test_better_worse_and_ties_are_counted_by_the_metrics_direction() -> None:
    a = {"a": 0.80, "b": 0.60, "c": 0.70, "d": 0.50 + 1e-6, "e": 0.9}
    b = {"a": 0.70, "b": 0.65, "c": 0.70, "d": 0.50, "e": 0.8}
    p = paired_difference(a, b, n_boot=100)
    assert (p.better, p.worse, p.ties, p.n) == (2, 1, 2, 5)  # 1e-6 is under the tie tolerance
    assert paired_difference(a, b, n_boot=100, tie=0.0).better == 3
    ssd = paired_difference({"a": 3.0, "b": 5.0}, {"a": 4.0, "b": 4.0}, n_boot=100, lower_is_better=True)
    assert (ssd.better, ssd.worse) == (1, 1) and isinstance(ssd, PairedDiff)


def test_volumes_pair_by_case_name_and_a_missing_one_is_named() -> None:
    a, b = {"OP_7": 0.9, "OP_8": 0.5}, {"OP_8": 0.4, "OP_7": 0.8}
    assert paired_difference(a, b, n_boot=50).mean == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"OP_9 only in classical"):
        paired_difference(a, {**b, "OP_9": 0.7}, names=("ours", "classical"))
    with pytest.raises(ValueError, match=r"OP_8 only in ours"):
        paired_difference(a, {"OP_7": 0.8}, names=("ours", "classical"))
    with pytest.raises(ValueError, match="OP_8"):
        paired_difference(a, {**b, "OP_8": float("nan")})
    with pytest.raises(ValueError, match="no volumes"):
        paired_difference({}, {})


def _rows() -> list[dict]:
    rows = []
    for seg in ("unet3d", "nnunet_style"):
        for i, base in enumerate((0.50, 0.60, 0.70, 0.80)):
            for method, gain in (("initial", 0.0), ("classical", 0.02 * (i % 2)), ("neurorefiner", 0.03)):
                rows.append({"method": method, "protocol": "root_seeded", "segmenter": seg, "case": f"v{i}",
                             "F1": base + gain, "SSD": 5.0 - 10 * gain})
    return [r for r in rows if not (r["segmenter"] == "nnunet_style" and r["method"] == "classical" and r["case"]
                                    == "v3")]  # one volume short: its differences cannot be paired


SPECS = [{"label": f"{m} {seg}", "method": m, "segmenter": seg}
         for seg in ("unet3d", "nnunet_style") for m in ("initial", "classical", "neurorefiner", "segfix")]


def test_each_refinement_row_is_compared_with_initial_and_classical_of_its_segmenter() -> None:
    summaries = collect(_rows(), SPECS, "root_seeded", ["F1"])
    columns, notes = paired_columns(summaries, SPECS, paired_refs({"rows": SPECS}))
    assert columns == ["dF1_initial", "dF1_classical"]
    initial, classical, ours, segfix = summaries[:4]
    assert "dF1_initial" not in initial and "dF1_classical" not in classical
    assert classical["dF1_initial"] == pytest.approx(0.01) and classical["dF1_initial_better"] == 2
    assert ours["dF1_initial"] == pytest.approx(0.03) and ours["dF1_initial_better"] == 4
    assert (ours["dF1_classical_better"], ours["dF1_classical_worse"]) == (4, 0)
    assert np.isnan(segfix["dF1_initial"])  # no volumes: no figure
    assert [n.split(":")[0] for n in notes] == ["ΔF1 initial of classical nnunet_style",
                                                "ΔF1 classical of neurorefiner nnunet_style"]
    assert "v3 only in initial nnunet_style" in notes[0]
    assert paired_refs({"rows": SPECS[:1] + SPECS[2:3]}) == []  # no classical row: no paired columns
    assert paired_refs({"rows": SPECS[:1] + SPECS[2:3], "paired": True}) == ["initial"]
    assert paired_refs({"rows": SPECS, "paired": False}) == []


class _Ds:
    name = "synthetic_zbfwb"


def test_a_paper_table_carries_the_columns_at_its_end(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"out_dir": str(tmp_path), "split": "test", "allow_dirty": True,
                            "table": {"name": "t", "title": "T", "out": str(tmp_path), "protocol": "root_seeded",
                                      "metrics": ["SSD", "F1"], "command": "python evaluate.py experiment=t",
                                      "rows": SPECS}})
    paths = write_paper_table(cfg, _rows(), _Ds())
    md = paths["md"].read_text()
    head = next(line for line in md.splitlines() if line.startswith("| Method"))
    assert head == "| Method | n | SSD↓ | F1↑ | ΔF1 initial | ΔF1 classical |"
    ours = next(line for line in md.splitlines() if line.startswith("| neurorefiner unet3d "))
    assert ours.endswith("| **68.00** | +3.00 [+3.00, +3.00] 4↑/0↓ | +2.00 [+1.00, +3.00] 4↑/0↓ |"), ours
    assert next(line for line in md.splitlines() if line.startswith("| initial unet3d ")).endswith("|  |  |")
    assert next(line for line in md.splitlines() if line.startswith("| segfix unet3d ")).endswith("| – | – |")
    assert "95 % bootstrap interval over volumes" in md and "v3 only in initial nnunet_style" in md
    with open(paths["csv"]) as fh:
        header = next(csv.reader(fh))
    old = ["method", "label", "n", "SSD", "F1", "seconds_per_volume", "edits_accepted", "edits_rejected",
           "edits_escalated", "share_accepted", "share_rejected", "share_escalated"]
    parts = ["", "_lo", "_hi", "_better", "_worse", "_ties"]
    assert header == old + [f"dF1_{ref}{p}" for ref in ("initial", "classical") for p in parts]
    # a doc block shows a paired difference as the table prints it; its parts stay out of a block without cols
    (tmp_path / "t.csv").write_bytes(paths["csv"].read_bytes())
    block = render(tmp_path, parse_spec("t.csv rows=3 cols=label,F1,dF1_initial,dF1_classical"))
    assert block.splitlines()[0] == "| Method | F1↑ | ΔF1 initial | ΔF1 classical |"
    assert block.splitlines()[2] == ("| neurorefiner unet3d | 68.00 | +3.00 [+3.00, +3.00] 4↑/0↓ "
                                     "| +2.00 [+1.00, +3.00] 4↑/0↓ |")
    assert "dF1_initial_lo" not in render(tmp_path, parse_spec("t.csv rows=3"))


def test_a_committed_table_without_the_columns_still_renders() -> None:
    root = Path(__file__).resolve().parents[2]
    text = render(root, parse_spec("experiments/table_diadem/table_diadem.csv cols=label,F1 rows=1-2"))
    assert text.splitlines()[2] == "| 3D U-Net (initial masks) | 75.93 |"
