"""The judge's end effect on DIADEM dev, cheaply: its own choices made directly (a perfect editor, the ceilings'
``judge_a`` row) beside the initial mask, the classical refiner and the shipped JSON judge's choices.

Each dev stack is judged by a judge of the named model types trained on every mined candidate except that
stack's (leave one stack out; the synthetic stand-ins and the other dev stacks stay in). The shipped JSON judge
was trained on all six dev stacks, the stack itself included: its row is an optimistic baseline. Joins pass
the Inspector's gate as in the loop. Scored as the tables are (root-seeded APP2). Command:
``neurorefiner study judge-dev``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurorefiner.agents.candidates import KINDS


def held_out_judge(root: Path, stack: str, models: dict[str, str], epochs: int = 8) -> Any:
    """A judge trained on every mined candidate but ``stack``'s (DIADEM dev)."""
    from neurorefiner.adaptation.judge.mining import load_table
    from neurorefiner.adaptation.judge.model_fit import MIN_PRECISION, inner_threshold
    from neurorefiner.agents.learned.judge import Judge

    boosters, thresholds = {}, {}
    for kind in KINDS:
        t = load_table(root, kind)
        t = t.subset(t.group != f"diadem/{stack}")
        m, thr, _, _ = inner_threshold(models[kind], t, MIN_PRECISION[kind], epochs=epochs)
        if m is not None:
            boosters[kind], thresholds[kind] = m, thr
    return Judge(boosters, thresholds, meta={"held_out": stack})


def judge_dev(root: Path, out: Path, stacks: Sequence[str], models: dict[str, str], segmenter: str = "unet3d",
              command: str = "", progress: bool = True, loop: bool = False) -> Path:
    """``loop``: each judge also drives the learned loop with the shipped editor (rows ``..., in the loop``:
    the NeuroRefiner row it would give, :func:`neurorefiner.studies.ceilings.loop_mask`). Outputs
    ``judge_dev[_loop][_<segmenter> when not unet3d].md`` and ``.csv``."""
    from tqdm import tqdm

    from neurorefiner.adaptation.judge.training import gold_cases
    from neurorefiner.agents.candidates import apply_candidates, find_candidates
    from neurorefiner.agents.learned.judge import CropView, Judge
    from neurorefiner.agents.learned.roles import choose, join_gate, shipped_judge
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv
    from neurorefiner.studies.ceilings import classical_mask, loop_mask, protocol_scorer

    stamp = provenance(command)   # before this run writes its own tracked outputs (else the table reads +dirty)
    score = protocol_scorer()
    shipped = Judge.load(shipped_judge())
    rows = []
    cases = [g for g in gold_cases("diadem", "dev", [segmenter]) if g.case in set(stacks)]
    for gc in tqdm(cases, desc="judge on dev", disable=not progress):
        cs = find_candidates(gc.image, gc.mask, gc.spacing)
        view = CropView(gc.image, gc.mask, gc.spacing, cs.levels)
        masks = {"initial": gc.mask, "classical": classical_mask(gc.image, gc.mask, gc.spacing, gc.gold)}
        for name, judge in (("shipped judge.json (saw the stack)", shipped),
                            ("new judge, held out", held_out_judge(root, gc.case, models))):
            p, passed = judge.decide(cs.candidates, view if judge.uses_crops else None)
            picked = choose(cs.candidates, p, passed, gate=join_gate)
            masks[name] = apply_candidates(gc.mask, [c for c, _ in picked if c.kind != "prune"])
            masks[name + " + prunes"] = apply_candidates(gc.mask, [c for c, _ in picked])
            if loop:
                masks[name + ", in the loop"], _ = loop_mask(gc, judge)
        for name, m in masks.items():
            s = score(m, gc.gold, gc.spacing)
            rows.append({"case": gc.case, "segmenter": segmenter, "row": name,
                         **{k: round(float(s[k]), 4) for k in ("SD", "SSD", "PRE", "REC", "F1")}})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "judge_dev" + ("_loop" if loop else "") + ("" if segmenter == "unet3d" else f"_{segmenter}")
    write_rows_csv(out / f"{stem}.csv", rows)
    names = list(dict.fromkeys(r["row"] for r in rows))
    stacks_done = list(dict.fromkeys(r["case"] for r in rows))
    lines = [f"# The judge's choices made directly on DIADEM dev (real data, {segmenter} masks)", "",
             f"Produced by `{command}` on {stamp['date']} at commit `{stamp['commit']}`.", "",
             "Models of the new judge: " + ", ".join(f"{k}: {v}" for k, v in models.items())
             + ". Root-seeded APP2; F1 etc. in %.", "",
             "| row | " + " | ".join(f"F1[{c}]" for c in stacks_done) + " | mean F1 | mean PRE | mean REC |",
             "|---|" + "---|" * (len(stacks_done) + 3)]
    for name in names:
        rs = {r["case"]: r for r in rows if r["row"] == name}
        vals = [rs[c] for c in stacks_done if c in rs]
        lines.append(f"| {name} | " + " | ".join(f"{100 * rs[c]['F1']:.2f}" for c in stacks_done) + " | "
                     + " | ".join(f"{100 * sum(v[k] for v in vals) / len(vals):.2f}" for k in ("F1", "PRE", "REC"))
                     + " |")
    return write_markdown(out / f"{stem}.md", "\n".join(lines) + "\n")
