"""The choose step: a refiner's decision policy picked on validation by the score the tables report.

Why: the judge's thresholds used to come from a per-candidate precision floor and the gates, the reach and the
editor's brightness gate from hand-picked val runs, and the plain classical refiner beat the result on most
tables. nnU-Net settles its post-processing on its cross-validation by the metric it reports and writes the
decision beside the model; this step does the same, with the classical refiner among the choices, so on
validation the chosen refiner is never below it and what the learned parts add is measured, not assumed.

How, cheaply:

1. **Screen.** Per validation case the candidate edits are enumerated once at the longest reach tried, scored
   once by the judge (on DIADEM a judge that never saw the stack: leave one stack out), and every policy of the
   grid (:data:`JOIN_THRESHOLDS` x :data:`REMOVE_THRESHOLDS` x prune x gates x :data:`REACHES`) picks its edits
   from them, made directly (a perfect editor, as the ceilings study does). Policies that pick the same edits
   share one trace; each distinct mask is traced with APP2 seeded at the gold root and scored.
2. **Confirm.** The best few screened policies run the full loop (Algorithm 1 with the editor, as
   ``refine.py`` runs it), at T_max 5 and at 1, with the editor's brightness gate on isolated pieces on and off.
3. **Choose** by mean root-seeded F1 over the validation cases among the confirmed loops, the classical refiner
   (``conf/method/classical.yaml``), classical with its bridges judged (each bridge the judge rates under one of
   :data:`VETO_THRESHOLDS` vetoed: :mod:`neurorefiner.agents.learned.join_veto`) and the initial mask; ties go
   to the simpler (initial, classical, judged classical, then the loop).

The one threshold rule of the code: everything a refiner decides with is chosen here and written into
``plans.json`` (:mod:`neurorefiner.io.refiner_plans`), with the validation table of every policy tried.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

JOIN_THRESHOLDS: tuple[float | None, ...] = (None, 0.0, 0.2, 0.4, 0.6, 0.8, 1.1)
"""None: the judge's own threshold; 0.0: every join within reach; 1.1: no join."""
REMOVE_THRESHOLDS: tuple[float | None, ...] = (None, 0.5, 1.1)
REACHES = (8.0, 16.0)
VETO_THRESHOLDS = (0.0, 0.2, 0.4, 0.6, 0.8)
"""The judge's floor under which a bridge of classical's is vetoed (:mod:`neurorefiner.agents.learned.join_veto`);
each is an exact run of what refine.py would do, so these rows are finalists as they stand."""
VETO_REACHES = (1.0, 2.0, 4.0)
"""Classical's reach (its ``max_gap``) times these: with the judge's veto a longer bridge may pay (a floor of 0.0
at a longer reach is classical reaching further, unjudged: its plan needs no judge)."""


def judged_grid() -> list[tuple[float, float]]:
    """(max_gap, veto threshold) of each judged-classical row; classical's own (its reach, no veto) left out."""
    gap = float(classical_settings()["max_gap"])
    return [(gap * r, t) for r in VETO_REACHES for t in VETO_THRESHOLDS if (r, t) != (1.0, 0.0)]
CONFIRM = 3
"""Screened policies confirmed with the full loop; the best of them is then tried at T_max 1, with the brightness
gate off and with each other editor (``variants``)."""


@dataclass(frozen=True)
class Budget:
    """How many full-loop runs the confirmation spends: each costs one loop per validation case (about 100 s on a
    128 x 512 x 512 stand-in volume, seconds on a DIADEM stack), so a large validation set may confirm fewer."""

    confirm: int = CONFIRM
    variants: bool = True

    def options(self) -> str:
        """The command-line options that give this budget (empty at the defaults)."""
        return (f" --confirm {self.confirm}" if self.confirm != CONFIRM else "") + \
            ("" if self.variants else " --no-variants")
SIMPLER = ("initial", "classical")


@dataclass(frozen=True)
class Policy:
    """One decision policy of the learned agents: the judge's threshold per kind (None: its own), the reach, the
    three join gates (gap signal, crowding, the attached piece's brightness) on or off, prunes on or off; and
    for the loop, T_max and the editor's brightness gate on isolated pieces."""

    join: float | None = None
    remove: float | None = None
    prune: bool = True
    gates: bool = True
    reach_um: float = 8.0
    t_max: int = 5
    max_brightness: float = 0.3

    @property
    def name(self) -> str:
        def thr(v: float | None) -> str:
            return "judge" if v is None else ("never" if v > 1 else f"{v:.1f}")

        return (f"join {thr(self.join)} / remove {thr(self.remove)} / prune {'on' if self.prune else 'off'} / "
                f"gates {'on' if self.gates else 'off'} / reach {self.reach_um:g} um")

    def thresholds(self, judge: Any) -> dict[str, float]:
        """Per-kind thresholds with the judge's own where the policy keeps them (no prune: never)."""
        out = dict(judge.thresholds)
        for kind, value in (("join", self.join), ("remove", self.remove)):
            if value is not None:
                out[kind] = float(value)
        if not self.prune:
            out["prune"] = 1.1
        return out

    def inspector(self, judge: Any) -> dict[str, Any]:
        """The learned Inspector's keyword arguments that carry this policy."""
        from neurorefiner.io.refiner_plans import AGENT_DEFAULTS

        gates = {k: AGENT_DEFAULTS[k] for k in ("join_signal_min", "join_max_crowding", "join_piece_min_signal")}
        if not self.gates:
            gates = {"join_signal_min": -1.0, "join_max_crowding": 1e9, "join_piece_min_signal": 0.0}
        return {"reach_um": self.reach_um, "prune": self.prune, "thresholds": self.thresholds(judge), **gates}


def policy_grid() -> list[Policy]:
    return [Policy(j, r, p, g, reach) for j, r, p, g, reach in
            itertools.product(JOIN_THRESHOLDS, REMOVE_THRESHOLDS, (True, False), (True, False), REACHES)]


# ------------------------------------------------------------------------------------------------ scoring
def case_scorer() -> Callable[[np.ndarray, Any], float]:
    """mask, case -> root-seeded F1, through the evaluation's own :func:`~neurorefiner.evaluation.runner.score_case`
    with the tracing and metrics the tables use (``conf/tracing/app2.yaml``, ``conf/metrics/default.yaml``)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from neurorefiner.evaluation.runner import score_case
    from neurorefiner.paths import conf_dir

    tracer = instantiate(OmegaConf.load(conf_dir() / "tracing" / "app2.yaml"))
    scorer = instantiate(OmegaConf.load(conf_dir() / "metrics" / "default.yaml"))

    class _Gold:
        def __init__(self, gc: Any) -> None:
            self.gc = gc

        def gold(self) -> Any:
            return self.gc.gold

    def score(mask: np.ndarray, gc: Any) -> float:
        return score_case(mask, _Gold(gc), gc.spacing, tracer, scorer, "root_seeded")["F1"]

    return score


def screen_case(gc: Any, judge: Any, policies: Sequence[Policy], score: Callable[[np.ndarray, Any], float]
               ) -> dict[Policy, float]:
    """F1 of each policy's edits made directly on one case (policies that pick the same edits share a trace)."""
    from neurorefiner.agents.candidates import CandidateSettings, apply_candidates, find_candidates
    from neurorefiner.agents.learned.attached_piece import PieceCheck
    from neurorefiner.agents.learned.judge import CropView
    from neurorefiner.agents.learned.roles import choose, join_gate

    root = gc.root("gold")
    found = find_candidates(gc.image, gc.mask, gc.spacing, CandidateSettings(reach_um=max(REACHES)), root=root)
    cands = found.candidates
    view = CropView(gc.image, gc.mask, tuple(gc.spacing), found.levels) if judge.uses_crops else None
    p = judge.probabilities(cands, view)
    gap = np.array([c.features.get("gap_um", 0.0) if c.kind == "join" else 0.0 for c in cands])
    piece = PieceCheck()
    by_edits: dict[frozenset, float] = {}
    out = {}
    for policy in policies:
        t = policy.thresholds(judge)
        passed = np.array([p[i] >= t.get(c.kind, 1.1) for i, c in enumerate(cands)], bool) & (gap <= policy.reach_um)

        def gate(c: Any, policy: Policy = policy) -> bool:
            return not policy.gates or join_gate(c, 0.25, 4, policy.reach_um, piece)

        chosen = [c for c, _ in choose(cands, p, passed, policy.prune, gate)]
        key = frozenset(c.key for c in chosen)
        if key not in by_edits:
            by_edits[key] = score(apply_candidates(gc.mask, chosen), gc)
        out[policy] = by_edits[key]
    return out


# ------------------------------------------------------------------------------------------------ the loop
def loop_f1(gc: Any, judge: Any, policy: Policy, editor: str | None, score: Callable[[np.ndarray, Any], float]
            ) -> float:
    """Root-seeded F1 of the full loop (Algorithm 1: the learned roles at ``policy``, the editor ``editor`` (None:
    the shipped one) with its brightness gate) on one case, built as ``refine.py`` builds its run."""
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir
    from neurorefiner.refine.run import RefineRun

    agent = OmegaConf.load(conf_dir() / "agent" / "learned.yaml")
    agent.inspector = OmegaConf.merge(agent.inspector, {k: v for k, v in policy.inspector(judge).items()})
    editor_cfg = OmegaConf.load(conf_dir() / "editor" / "toporefinenet.yaml")
    editor_cfg.checkpoint = editor
    editor_cfg.decoding.max_brightness = policy.max_brightness
    run = RefineRun.build(agent, None, editor_cfg, policy.t_max, role_kwargs={"inspector": {"judge": judge}})
    result = run.with_spacing(gc.spacing, "the dataset's voxel size").run(gc.image, gc.mask, root=gc.root("gold"))
    return score(result.mask, gc)


def classical_f1(gc: Any, score: Callable[[np.ndarray, Any], float]) -> float:
    """Root-seeded F1 of the classical refiner at ``conf/method/classical.yaml``'s settings, bridging to the root's
    piece (as its table row does)."""
    from neurorefiner.baselines.classical import classical_refine

    params = classical_settings()
    return score(classical_refine(gc.image, gc.mask, gc.spacing, **params, root=gc.root("gold")), gc)


def judged_classical_f1(gc: Any, judge: Any, score: Callable[[np.ndarray, Any], float]) -> list[float]:
    """Root-seeded F1 of classical with its bridges judged at each (reach, floor) of :func:`judged_grid` (masks
    that come out the same share one trace)."""
    from neurorefiner.agents.learned.join_veto import judged_classical
    from neurorefiner.agents.trace import array_hash

    traced: dict[str, float] = {}
    out = []
    settings, root = classical_settings(), gc.root("gold")
    for gap, t in judged_grid():
        mask = judged_classical(gc.image, gc.mask, gc.spacing, judge, t, root=root, **{**settings, "max_gap": gap})
        key = array_hash(mask)
        if key not in traced:
            traced[key] = score(mask, gc)
        out.append(traced[key])
    return out


def classical_settings() -> dict[str, Any]:
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir

    node = OmegaConf.to_container(OmegaConf.load(conf_dir() / "method" / "classical.yaml"))
    return {k: node[k] for k in ("min_size", "max_gap", "margin", "power", "floor", "passes")}  # type: ignore


# ------------------------------------------------------------------------------------------------ choosing
@dataclass
class Row:
    """One policy's validation result: per-case F1, how it was scored (screen: edits made directly; loop)."""

    name: str
    kind: str            # initial | classical | screen | loop
    f1: dict[str, float]
    policy: dict | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.f1.values()))) if self.f1 else float("nan")


def choose_policy(cases: Sequence[Any], judges: Callable[[Any], Any], editors: Sequence[str | None],
                  progress: bool = True, state: Path | None = None, budget: Budget = Budget()
                  ) -> tuple[Row, list[Row]]:
    """The chosen row and every row tried, on ``cases`` (GoldCase: image, mask, gold, spacing); ``judges``:
    case -> the judge that never saw it; ``editors``: the editors to try (None: the shipped one). With ``state``
    (a JSON file) finished parts are kept there and a killed run resumes from them."""
    from tqdm import tqdm

    from neurorefiner.refine.run import policy_name

    score = case_scorer()
    done = json.loads(state.read_text()) if state is not None and state.exists() else {}

    def keep(key: str, value: Any) -> None:
        done[key] = value
        if state is not None:
            from neurorefiner.io.atomic import write_text_atomic

            write_text_atomic(state, json.dumps(done))

    def saved(key: str, make: Callable[[], float]) -> float:
        if key not in done:
            keep(key, make())
        return float(done[key])

    def saved_list(key: str, make: Callable[[], list[float]]) -> list[float]:
        if key not in done:
            keep(key, make())
        return [float(v) for v in done[key]]

    names = [f"{gc.case}/{gc.segmenter}" for gc in cases]
    rows = [Row("initial", "initial", {n: saved(f"initial|{n}", lambda gc=gc: score(gc.mask, gc))
                                       for n, gc in zip(names, cases)}),
            Row("classical", "classical", {n: saved(f"classical|{n}", lambda gc=gc: classical_f1(gc, score))
                                           for n, gc in zip(names, cases)},
                {"kind": "classical", **{k: classical_settings()[k] for k in ("min_size", "max_gap")}})]
    grid_key = ",".join(f"{gap:g}/{t:g}" for gap, t in judged_grid())   # a changed grid is computed afresh
    judged = {n: saved_list(f"judged|{grid_key}|{n}", lambda gc=gc: judged_classical_f1(gc, judges(gc), score))
              for n, gc in tqdm(list(zip(names, cases)), desc="choose: judged classical", unit="case",
                                disable=not progress)}
    min_size = classical_settings()["min_size"]
    for i, (gap, t) in enumerate(judged_grid()):
        policy = {"kind": "classical", "min_size": min_size, "max_gap": gap, **({"join_veto": t} if t > 0 else {})}
        rows.append(Row(policy_name(policy), "judged", {n: judged[n][i] for n in names}, policy))
    grid = policy_grid()
    screened: dict[Policy, dict[str, float]] = {p: {} for p in grid}
    for n, gc in tqdm(list(zip(names, cases)), desc="choose: screen", unit="case", disable=not progress):
        key = f"screen|{n}"
        if key not in done:
            f1 = screen_case(gc, judges(gc), grid, score)
            keep(key, [f1[p] for p in grid])
        for p, v in zip(grid, done[key]):
            screened[p][n] = float(v)
    ranked = sorted(grid, key=lambda p: -float(np.mean(list(screened[p].values()))))
    rows += [Row(p.name, "screen", screened[p], asdict(p)) for p in ranked]
    rows += confirm(cases, names, judges, ranked, editors, score, saved, progress, budget)
    order = {"initial": 0, "classical": 1, "judged": 2, "loop": 3}
    finalists = [r for r in rows if r.kind in order]
    best = max(finalists, key=lambda r: (round(r.mean, 6), -order[r.kind]))
    return best, rows


def confirm(cases: Sequence[Any], names: Sequence[str], judges: Callable[[Any], Any], ranked: Sequence[Policy],
            editors: Sequence[str | None], score: Callable, saved: Callable, progress: bool,
            budget: Budget = Budget()) -> list[Row]:
    """The full loop for the best screened policies (distinct in what they pick), then, greedily on the best of
    them, T_max 1, the brightness gate off and each other editor."""
    from tqdm import tqdm

    picked: list[Policy] = []
    for p in ranked:
        if len(picked) == max(budget.confirm, 1):
            break
        if all(p.join != q.join or p.gates != q.gates or p.reach_um != q.reach_um or p.remove != q.remove
               for q in picked):
            picked.append(p)
    rows: list[Row] = []

    def loop_row(p: Policy, editor: str | None) -> Row:
        tag = "shipped editor" if editor is None else f"editor {Path(editor).name}"
        name = f"{p.name} / T_max {p.t_max} / brightness gate {p.max_brightness:g} / {tag}"
        f1 = {}
        for n, gc in tqdm(list(zip(names, cases)), desc=f"choose: loop {len(rows) + 1}", unit="case",
                          disable=not progress):
            f1[n] = saved(f"loop|{name}|{n}", lambda gc=gc: loop_f1(gc, judges(gc), p, editor, score))
        row = Row(name, "loop", f1, {**asdict(p), "editor": editor})
        rows.append(row)
        return row

    best = max((loop_row(p, editors[0]) for p in picked), key=lambda r: r.mean)
    if not budget.variants:
        return rows
    for change in ({"t_max": 1}, {"max_brightness": 1.0}):
        base = Policy(**{k: v for k, v in best.policy.items() if k != "editor"})  # type: ignore[union-attr]
        row = loop_row(replace(base, **change), best.policy["editor"])  # type: ignore[index]
        best = row if row.mean > best.mean else best
    for editor in editors[1:]:
        base = Policy(**{k: v for k, v in best.policy.items() if k != "editor"})  # type: ignore[union-attr]
        row = loop_row(base, editor)
        best = row if row.mean > best.mean else best
    return rows


# ------------------------------------------------------------------------------------------------ the step
MIN_STACKS = 3
"""Fewer stacks with gold than this cannot choose leave one stack out (a judge learns from two)."""


def validation_cases(dataset: str, segmenters: Sequence[str], folder: Path, progress: bool = True
                     ) -> tuple[str, list[Any], Callable[[Any], Any], str]:
    """The cases to choose on, the judge of each and how they were judged: the dataset's ``val`` split with the
    folder's judge (trained on ``train``), or, without a ``val`` split (DIADEM dev, a lab's own stacks), the
    training split leave one stack out (each stack judged by a judge trained on the others)."""
    from neurorefiner.adaptation.judge.training import gold_cases, held_out_judges, labelled_set
    from neurorefiner.adaptation.settings import check_dataset
    from neurorefiner.agents.learned.judge import Judge
    from neurorefiner.agents.learned.roles import shipped_judge
    from neurorefiner.errors import InputError

    train, val = check_dataset(dataset)
    split = val or train
    cases = gold_cases(dataset, split, list(segmenters))
    stacks = sorted({gc.case for gc in cases})
    if len(stacks) < (1 if val else MIN_STACKS):   # leave one stack out needs a few stacks to learn from
        raise InputError(f"--dataset {dataset}: {len(stacks)} stack(s) with gold in its {split} split; choosing a "
                         f"refiner's policy needs at least {MIN_STACKS}")
    if val:
        judge = Judge.load(folder / "judge.json" if (folder / "judge.json").exists() else shipped_judge())
        return split, cases, lambda gc: judge, f"the `{val}` split, judged by the refiner's judge"
    kept = work_dir(folder, dataset, segmenters) / "held_out_judges"
    if all((kept / f"{s}.json").exists() for s in stacks):   # a resumed run: the judges it trained
        held = {s: Judge.load(kept / f"{s}.json") for s in stacks}
    else:
        data, _ = labelled_set(cases, progress=progress)
        held = held_out_judges(data)
        kept.mkdir(parents=True, exist_ok=True)
        for group, judge in held.items():
            judge.save(kept / f"{group}.json")
    return split, cases, lambda gc: held[gc.group], f"the `{train}` split, leave one stack out"


def work_dir(folder: Path, dataset: str, segmenters: Sequence[str]) -> Path:
    """Where a choose run keeps its finished parts, one folder per (dataset, segmenters, the folder's judge and
    editor files): a run on other data or with a retrained judge never reads another's F1 back."""
    import hashlib

    from neurorefiner.inference.init_masks import file_sha256

    files = {n: file_sha256(folder / n) if (folder / n).exists() else None for n in ("judge.json", "editor.ckpt")}
    blob = json.dumps({"dataset": dataset, "segmenters": list(segmenters), **files}, sort_keys=True)
    return folder / "work" / f"choose_{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def plan_of(row: Row, folder: Path) -> dict[str, Any]:
    """The plans file's policy for a chosen row (thresholds only where the policy departs from the judge's)."""
    if row.kind == "judged":   # classical at another reach, its bridges judged when it has a floor
        veto = (row.policy or {}).get("join_veto") is not None
        return {**(row.policy or {}),
                **({"judge": "judge.json" if (folder / "judge.json").exists() else None} if veto else {})}
    if row.kind != "loop":
        return {"kind": row.kind, **({k: v for k, v in (row.policy or {}).items() if k != "kind"})}
    p = dict(row.policy or {})
    thresholds = {k: p[k] for k in ("join", "remove") if p[k] is not None}
    editor = p.get("editor")
    gates = Policy(gates=bool(p["gates"])).inspector(type("J", (), {"thresholds": {}})())
    return {"kind": "agents", "t_max": int(p["t_max"]), "max_brightness": float(p["max_brightness"]),
            "judge": "judge.json" if (folder / "judge.json").exists() else None,
            "editor": None if editor is None else Path(editor).name, "reach_um": float(p["reach_um"]),
            "thresholds": thresholds, "prune": bool(p["prune"]),
            **{k: gates[k] for k in ("join_signal_min", "join_max_crowding", "join_piece_min_signal")}}


def choose_refiner(dataset: str, folder: str | Path, segmenters: Sequence[str] = ("unet3d",),
                   progress: bool = True, budget: Budget = Budget()) -> dict[str, Any]:
    """Choose ``folder``'s policy on ``dataset``'s validation data; write ``plans.json`` and ``choose.md`` there.
    Returns what the adapt record keeps (the chosen row, the table's path, the splits read)."""
    from neurorefiner.io.refiner_plans import write_plan
    from neurorefiner.paths import git_commit

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    commit = git_commit()   # before anything is written here (a tracked plans.json rewritten reads as +dirty)
    split, cases, judges, how = validation_cases(dataset, segmenters, folder, progress)
    editors = [None] + ([str(folder / "editor.ckpt")] if (folder / "editor.ckpt").exists() else [])
    state = work_dir(folder, dataset, segmenters) / "choose_state.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    best, rows = choose_policy(cases, judges, editors, progress, state, budget)
    policy = plan_of(best, folder)
    record = {"dataset": dataset, "split": split, "segmenters": list(segmenters), "judged": how,
              "chosen": best.name, "commit": commit,
              "validation": [{"name": r.name, "kind": r.kind, "mean_f1": round(r.mean, 6), "f1": r.f1}
                             for r in rows]}
    write_plan(folder, policy, record)
    table = write_table(folder / "choose.md", dataset, how, best, rows, segmenters, commit, budget)
    return {"chosen": best.name, "kind": best.kind, "mean_f1": round(100 * best.mean, 2), "table": table.name}


SCREEN_SHOWN = 10


def write_table(path: Path, dataset: str, how: str, best: Row, rows: Sequence[Row], segmenters: Sequence[str],
                commit: str, budget: Budget = Budget()) -> Path:
    """The validation table of every policy tried (the screen's best ``SCREEN_SHOWN`` shown, all in plans.json)."""
    from neurorefiner.io.atomic import write_text_atomic

    cases = list(rows[0].f1)
    kind = "SYNTHETIC " if dataset.startswith("synthetic") else ""
    lines = [f"# The refiner's policy, chosen on {kind}{dataset} validation", "",
             f"Made by `neurorefiner choose --dataset {dataset} --refiner {path.parent} --segmenters "
             f"{','.join(segmenters)}{budget.options()}` at commit `{commit}`, on {how}; root-seeded APP2 F1 (%), "
             "the tables' score. `screen`: the policy's edits made directly (a perfect editor); `loop`: Algorithm 1 "
             "with the editor, as refine.py runs it; `judged`: classical with each bridge the judge rates under the "
             "floor vetoed. The choice is among initial, classical, judged classical and the loops.", "",
             f"**Chosen: {best.name}** ({best.kind}, mean F1 {100 * best.mean:.2f})", "",
             "| policy | scored by | mean F1 | " + " | ".join(cases) + " |", "|---|---|---|" + "---|" * len(cases)]
    shown = [r for r in rows if r.kind != "screen"] + [r for r in rows if r.kind == "screen"][:SCREEN_SHOWN]
    for r in shown:
        lines.append(f"| {r.name} | {r.kind} | {100 * r.mean:.2f} | "
                     + " | ".join(f"{100 * r.f1[c]:.2f}" for c in cases) + " |")
    n_screen = sum(r.kind == "screen" for r in rows)
    lines += ["", f"{n_screen} policies screened; the best {min(SCREEN_SHOWN, n_screen)} are shown, every one is in "
              "plans.json."]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path
