"""Does the Validator reject the right edits? Every edit of the learned loop on DIADEM dev, with what the
Validator said of it and what gold says of it.

The loop runs with every edit kept (Table 3's "Inspector + Advisor" row) while a shadow of the configured
Validator records its verdict and the check that decided it; each edit is then read against gold: a join or
repair is *right* when at least half of the voxels it added lie within ``tol_um`` of the gold tree, a removal
when at most a tenth of the voxels it removed do (the gold labels' own rule,
:mod:`neurorefiner.adaptation.judge.gold_labels`). Rejections of right edits are what lowers F1 when the
Validator is on (a rejected edit is retried with another instruction or escalated, never kept). Reported per
stack: the masks' F1 with every edit kept, and the verdict x gold table per rejection reason. The judge of
each stack is trained without it (leave one stack out, from the mined candidates of the other dev stacks).
Command: ``neurorefiner study validator-audit``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex
from neurorefiner.agents.roles import Verdict


def reason_class(reason: str) -> str:
    """A verdict's reason without its numbers: the check that decided it (the whole sentence, so that "the
    edit changed nothing" and "only #% of the change is at the named place" stay apart)."""
    return re.sub(r"[-+]?\d+(\.\d+)?%?", "#", reason).strip()


class ShadowValidator:
    """Asks ``inner`` and records its verdict with the edit's gold reading, then keeps the edit anyway."""

    name = "shadow"

    def __init__(self, inner: Any, gold: GoldIndex) -> None:
        self.inner, self.gold = inner, gold
        self.records: list[dict] = []

    def validate(self, ctx, flag, defect, advice, before, after, step) -> Verdict:  # type: ignore[no-untyped-def]
        v = self.inner.validate(ctx, flag, defect, advice, before, after, step)
        offset = np.array([s.start for s in advice.frame.window]) + np.asarray(ctx.origin)
        before, after = np.asarray(before, bool), np.asarray(after, bool)
        added, removed = np.argwhere(after & ~before) + offset, np.argwhere(before & ~after) + offset
        near_add = float(self.gold.near(added).mean()) if len(added) else float("nan")
        near_rm = float(self.gold.near(removed).mean()) if len(removed) else float("nan")
        op = advice.instruction.op
        if op in ("connect", "repair"):
            right = bool(len(added)) and near_add >= 0.5
        else:
            right = bool(len(removed)) and near_rm <= 0.1
        self.records.append({"round": step.round, "block": step.block, "defect_kind": defect.kind, "op": op,
                             "try": step.attempt,
                             "accept": bool(v.accept), "reason": v.reason, "check": reason_class(v.reason),
                             "added": int(len(added)), "removed": int(len(removed)),
                             "near_added": near_add, "near_removed": near_rm, "right": right})
        return Verdict(True, f"kept (shadow of: {v.reason})", v.info, v.checks)


def audit_case(gc: Any, judge: Any, t_max: int = 5, shadow: bool = True, validator: dict | None = None
               ) -> tuple[np.ndarray, list[dict]]:
    """The learned loop on one case with every edit kept and the Validator shadowed; ``shadow=False``: the
    loop as it runs (the Validator's verdicts obeyed; no records). ``validator``: settings that replace
    conf/agent/learned.yaml's (a design change measured against the configured one). The run is built as
    ``refine.py`` builds its run (:class:`~neurorefiner.refine.run.RefineRun`: conf/agent/learned.yaml with
    ``judge``, the shipped editor of conf/editor/toporefinenet.yaml), only its Validator wrapped."""
    import dataclasses

    from omegaconf import OmegaConf

    from neurorefiner.agents.loop import Agents
    from neurorefiner.paths import conf_dir
    from neurorefiner.refine.run import RefineRun

    agent = OmegaConf.load(conf_dir() / "agent" / "learned.yaml")
    agent.validator = OmegaConf.merge(agent.validator, validator or {})
    run = RefineRun.build(agent, None, OmegaConf.load(conf_dir() / "editor" / "toporefinenet.yaml"), t_max,
                          role_kwargs={"inspector": {"judge": judge}})
    roles = run.agents
    checker = ShadowValidator(roles.validator, GoldIndex(gc.gold, gc.spacing, gc.mask.shape)) if shadow else None
    if checker is not None:
        run = dataclasses.replace(run, agents=Agents(roles.inspector, roles.advisor, checker))
    result = run.with_spacing(gc.spacing, "the dataset's voxel size").run(gc.image, gc.mask)
    return result.mask, checker.records if checker is not None else []


def parse_settings(text: str) -> dict[str, float]:
    """``"min_inside=0.8,connect_margin=12"`` -> settings of the Validator (numbers; a bad pair is an
    :class:`~neurorefiner.errors.InputError` naming it)."""
    import inspect

    from neurorefiner.agents.learned import LearnedValidator
    from neurorefiner.errors import InputError

    known = set(inspect.signature(LearnedValidator.__init__).parameters) - {"self"}
    out: dict[str, float] = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        key, _, value = pair.partition("=")
        if key not in known:
            raise InputError(f"--validator: unknown setting {key!r} (one of {', '.join(sorted(known))})")
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--validator: {pair!r} is not key=number") from None
        out[key] = int(number) if number.is_integer() and "." not in value else number
    return out


def loso_judge(table_root: Path, held_out: str) -> Any:
    """A JSON-type judge (the shipped model types) trained on the mined DIADEM dev candidates of the other
    stacks; thresholds out of fold by stack."""
    from neurorefiner.adaptation.judge.mining import load_table
    from neurorefiner.adaptation.judge.training import LabelledSet, fit_judge
    from neurorefiner.agents.candidates import KINDS

    data = LabelledSet.empty()
    for kind in KINDS:
        t = load_table(table_root, kind, ["diadem"])
        keep = t.group != f"diadem/{held_out}"
        data.x[kind], data.y[kind], data.groups[kind] = t.x[keep], t.y[keep], t.group[keep]
    return fit_judge(data, meta={"held_out": held_out})


def validator_audit(cases: Sequence[str], segmenter: str, table_root: Path, out: Path, progress: bool = True,
                    command: str = "", judge: Path | None = None, validator: dict | None = None) -> Path:
    """``judge``: one judge for every stack instead of the held-out ones (e.g. the shipped judge, which saw the
    dev stacks: the audit asks about the Validator, not the judge). Each stack is also refined with the
    Validator obeyed (the full loop), so its F1 stands beside every edit kept's. ``validator``: Validator
    settings that replace the configured ones (both runs). Outputs: ``validator_audit_<segmenter>[_<k>-<v>...].md``
    and ``.csv``."""
    import datetime as dt

    from tqdm import tqdm

    from neurorefiner.adaptation.judge.training import gold_cases
    from neurorefiner.evaluation.tables import write_rows_csv
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.paths import git_commit
    from neurorefiner.studies.ceilings import protocol_scorer

    score = protocol_scorer()
    gcs = [g for g in gold_cases("diadem", "dev", [segmenter]) if not cases or g.case in cases]
    rows, stacks = [], []
    fixed = None
    if judge is not None:
        from neurorefiner.agents.learned.judge import Judge

        fixed = Judge.load(judge)
    for gc in tqdm(gcs, desc="validator audit", disable=not progress):
        stack_judge = fixed if fixed is not None else loso_judge(table_root, gc.case)
        mask, records = audit_case(gc, stack_judge, validator=validator)
        obeyed, _ = audit_case(gc, stack_judge, shadow=False, validator=validator)
        f0, f1 = score(gc.mask, gc.gold, gc.spacing)["F1"], score(mask, gc.gold, gc.spacing)["F1"]
        fv = score(obeyed, gc.gold, gc.spacing)["F1"]
        stacks.append({"case": gc.case, "initial_F1": round(f0, 4), "kept_all_F1": round(f1, 4),
                       "validator_F1": round(fv, 4),
                       "edits": len(records), "rejected": sum(not r["accept"] for r in records),
                       "rejected_right": sum((not r["accept"]) and r["right"] for r in records),
                       "accepted_wrong": sum(r["accept"] and not r["right"] for r in records)})
        rows += [{"case": gc.case, **r} for r in records]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"validator_audit_{segmenter}" + "".join(f"_{k}-{v}" for k, v in sorted((validator or {}).items()))
    if rows:
        write_rows_csv(out / f"{stem}.csv", rows)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# The Validator's verdicts against gold (DIADEM dev, real data, {segmenter} masks)", "",
             f"Produced by `{command}` on {when} at commit `{git_commit()}`.", "",
             "The learned loop with every edit kept; the configured Validator shadowed (neurorefiner.studies."
             "validator_audit). Judge: " + (f"`{judge}` for every stack" if judge else "each stack's held out") +
             ". Validator settings: " + (", ".join(f"{k}={v}" for k, v in validator.items()) + " (replacing "
                                         "conf/agent/learned.yaml's)" if validator else "conf/agent/learned.yaml's") +
             ". `right`: a join's added voxels at least half within 3 um of the gold, a removal's "
             "removed voxels at most a tenth. `Validator obeyed F1`: the full loop (a rejected edit retried or "
             "escalated); root-seeded APP2, F1 in %.", "",
             "| stack | initial F1 | every edit kept F1 | Validator obeyed F1 | edits | rejected | rejected but right "
             "| accepted but wrong |",
             "|---|---|---|---|---|---|---|---|"]
    for s in stacks:
        lines.append(f"| {s['case']} | {100 * s['initial_F1']:.2f} | {100 * s['kept_all_F1']:.2f} | "
                     f"{100 * s['validator_F1']:.2f} | {s['edits']} | "
                     f"{s['rejected']} | {s['rejected_right']} | {s['accepted_wrong']} |")
    if stacks:
        mean = {k: 100 * float(np.mean([s[k] for s in stacks])) for k in ("initial_F1", "kept_all_F1", "validator_F1")}
        lines.append(f"| mean | {mean['initial_F1']:.2f} | {mean['kept_all_F1']:.2f} | {mean['validator_F1']:.2f} | "
                     f"{sum(s['edits'] for s in stacks)} | {sum(s['rejected'] for s in stacks)} | "
                     f"{sum(s['rejected_right'] for s in stacks)} | {sum(s['accepted_wrong'] for s in stacks)} |")
    lines += ["", "Per check (the reason the Validator gave, numbers removed):", "",
              "| verdict | check | edits | right | wrong |", "|---|---|---|---|---|"]
    keys = sorted({(r["accept"], r["check"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for acc, check in keys:
        rs = [r for r in rows if r["accept"] == acc and r["check"] == check]
        lines.append(f"| {'accept' if acc else 'reject'} | {check} | {len(rs)} | {sum(r['right'] for r in rs)} | "
                     f"{sum(not r['right'] for r in rs)} |")
    return write_text_atomic(out / f"{stem}.md", "\n".join(lines) + "\n")
