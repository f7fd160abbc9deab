"""Cross-validation over DIADEM dev (OP_1-OP_6) for the CPU 3D U-Net: how many training steps, which
post-processing, and whether an average of seeds beats one network, judged on volumes the network never saw.

Three folds hold out {OP_1, OP_2}, {OP_3, OP_4}, {OP_5, OP_6}; each fold's network trains on the other four
cases with the shipped recipe (conf/experiment/segment_diadem_cpu.yaml) and exports its *last* checkpoint (the
held-out cases score it, so they must not also pick it). Run directories are named ``f<fold>_<steps>``; runs of
the same fold and budget with other seeds live in sibling roots (``cv_seed1/f1_256``).

- :func:`write_probs`: out-of-fold probability maps of one run (wide windows, Gaussian blending).
- :func:`write_ensemble`: one fold's seeds packed into one averaged network, and its maps.
- :func:`choose`: every (steps, threshold, gap bridging, dust, keep-largest) scored on the out-of-fold maps
  (mask -> APP2 -> F1/SSD against the gold SWC, as the tables are) and the choice. OP_7-OP_9 are never read.

Rule (:func:`neurorefiner.postprocessing.choose.choose_setting`): the highest mean F1 over the held-out
cases; settings within 0.01 of it go to the lower mean SSD, then the simpler setting (one network, no gap
bridging, no dust removal, no component filter, threshold nearest 0.5). A single network's figures are first
averaged over the seeds run (the expected network, not the luckiest seed). Only settings whose inference fits
the speed budget (256^3 in 30 s on 2 cores, from a bench JSON) can be chosen. Command: ``neurorefiner
study segmenter-cv``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError

FOLDS = {1: ("OP_1", "OP_2"), 2: ("OP_3", "OP_4"), 3: ("OP_5", "OP_6")}
THRESHOLDS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)  # a grid ending at 0.8 once chose its edge
DUST = (0, 1000)
KEEP = (0, 1)
BRIDGE = (0.0,)  # gap bridging in um (postprocessing.gap_bridging); the shipped choice scored 0, 3, 6
RUN_NAME = re.compile(r"f(?P<fold>\d+)_(?P<steps>\d+)$")
SPEED_BUDGET_S = 30.0  # sliding-window inference of the CPU U-Net on 256^3 under 30 s on 2 cores
SINGLE_BENCH_CASE = "segmentation/sliding_window_unet3d_cpu_256^3_wide"


def parse_run(path: Path) -> tuple[int, int]:
    """(fold, steps) from a run directory named f<fold>_<steps>."""
    m = RUN_NAME.search(path.name)
    if not m or int(m["fold"]) not in FOLDS:
        raise InputError(f"{path}: run directories are named f<fold>_<steps>, fold in {sorted(FOLDS)}")
    return int(m["fold"]), int(m["steps"])


def dev_cases() -> dict:
    from neurorefiner.data import get_dataset

    return {c.name: c for c in get_dataset("diadem").cases("dev")}


def case_map(seg, case) -> tuple[np.ndarray, tuple[int, int, int]]:  # type: ignore[no-untyped-def]
    """One case's probability map as the tables compute it: the checkpoint's normalisation, wide windows,
    overlap 0.25, Gaussian blending. Returns (map, window)."""
    from neurorefiner.data.transforms import normalize_image
    from neurorefiner.inference.segmenter import default_window, max_input_of
    from neurorefiner.models.sliding_window import sliding_window_probs

    raw = case.image().load()
    img = normalize_image(raw, str(case.image_path), seg.normalization)
    window = default_window(seg.patch_size, raw.shape, max_input=max_input_of(seg.net))
    return sliding_window_probs(seg.net, img, window, overlap=0.25, mode="gaussian"), window


def write_probs(run: Path, threads: int) -> None:
    """Out-of-fold probability maps (wide windows, Gaussian blending) of the run's held-out cases."""
    import torch

    from neurorefiner.inference.segmenter import load_segmenter
    from neurorefiner.io.atomic import atomic_path

    torch.set_num_threads(threads)
    fold, _ = parse_run(run)
    seg = load_segmenter(run / "segmenter.pt")
    held_out = set(FOLDS[fold])
    trained_on = set(seg.meta.get("train_cases") or ())
    if trained_on & held_out:
        raise InputError(f"{run}: trained on {sorted(trained_on & held_out)}, which this fold holds out")
    cases = dev_cases()
    out = run / "oof_probs"
    out.mkdir(exist_ok=True)
    for name in FOLDS[fold]:
        target = out / f"{name}.npy"
        if target.exists():
            continue
        t = time.perf_counter()
        probs, window = case_map(seg, cases[name])
        with atomic_path(target) as tmp, open(tmp, "wb") as fh:
            np.save(fh, probs.astype(np.float16))
        print(f"{run.name} {name}: window {window}, {time.perf_counter() - t:.0f} s")


def write_ensemble(members: list[Path], out: Path, threads: int, recompute: bool = False) -> None:
    """Average the member runs (same fold and budget, other seeds) into ``out``/segmenter.pt and its maps.

    The maps are the mean of the members' stored maps, which is what inference with the packed network
    computes (``sliding_window_probs`` averages an ensemble's member maps), up to float16 storage, at a
    fraction of the time; ``--recompute`` runs the packed network instead.
    """
    from neurorefiner.inference.ensemble import export_ensemble
    from neurorefiner.io.atomic import atomic_path

    keys = {parse_run(m) for m in members}
    if len(keys) != 1 or parse_run(out) not in keys:
        raise InputError(f"members and --out must share one f<fold>_<steps> name, got "
                         f"{sorted(m.name for m in members)} -> {out.name}")
    if not (out / "segmenter.pt").exists():
        export_ensemble([m / "segmenter.pt" for m in members], out / "segmenter.pt")
    if recompute:
        write_probs(out, threads)
        return
    (out / "oof_probs").mkdir(exist_ok=True)
    for name in FOLDS[parse_run(out)[0]]:
        maps = [m / "oof_probs" / f"{name}.npy" for m in members]
        missing = [str(p) for p in maps if not p.exists()]
        if missing:
            raise InputError(f"missing member maps {missing}: run `neurorefiner study segmenter-cv probs` on them "
                             "first")
        mean = np.mean([np.load(p).astype(np.float32) for p in maps], axis=0)
        with atomic_path(out / "oof_probs" / f"{name}.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, mean.astype(np.float16))
        print(f"{out.name} {name}: mean of {len(maps)} members' maps")


def verify_ensemble(run: Path, case_name: str, threshold: float, threads: int) -> str:
    """Run the packed ensemble of ``run`` on one held-out case and compare with its stored (averaged) map."""
    import torch

    from neurorefiner.inference.segmenter import load_segmenter

    torch.set_num_threads(threads)
    if case_name not in FOLDS[parse_run(run)[0]]:
        raise InputError(f"{case_name} is not held out by {run.name}")
    seg = load_segmenter(run / "segmenter.pt")
    t = time.perf_counter()
    probs, _ = case_map(seg, dev_cases()[case_name])
    stored = np.load(run / "oof_probs" / f"{case_name}.npy").astype(np.float32)
    diff = np.abs(probs - stored)
    flips = int(((probs > threshold) != (stored > threshold)).sum())
    return (f"{run} {case_name}: packed ensemble vs stored mean of member maps: max |diff| {diff.max():.2e}, "
            f"mean {diff.mean():.2e}; voxels on different sides of {threshold}: {flips} of {probs.size} "
            f"({time.perf_counter() - t:.0f} s)")


def members_of(run: Path) -> int:
    """How many networks the run's checkpoint averages (1: a single network)."""
    from neurorefiner.inference.segmenter import load_segmenter

    return len(load_segmenter(run / "segmenter.pt").meta.get("members") or ()) or 1


def score_runs(runs: list[Path], thresholds: tuple[float, ...] = THRESHOLDS, dust: tuple[int, ...] = DUST,
               keep: tuple[int, ...] = KEEP, bridge: tuple[float, ...] = BRIDGE) -> list[dict]:
    """One row per (run, case, setting): mask -> APP2 -> metrics against the gold SWC. Each (run, case) is
    cached in ``<run>/oof_scores/<case>.json``, keyed by the grid and the map file's time stamp."""
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.postprocessing.choose import score_settings, settings_grid

    cases = dev_cases()
    grid = settings_grid(thresholds, dust, keep, bridge)
    rows = []
    for run in runs:
        fold, steps = parse_run(run)
        members = members_of(run)
        for name in FOLDS[fold]:
            path = run / "oof_probs" / f"{name}.npy"
            if not path.exists():
                raise InputError(f"{path}: missing; run `neurorefiner study segmenter-cv probs --run {run}` first")
            cache = run / "oof_scores" / f"{name}.json"
            key = {"grid": [p.as_dict() for p in grid], "map_mtime_ns": path.stat().st_mtime_ns}
            if cache.exists() and json.loads(cache.read_text()).get("key") == key:
                scored = json.loads(cache.read_text())["rows"]  # same map, same grid: traced before
                for r in scored:
                    r.setdefault("bridge_um", 0.0)  # cached before bridging existed
            else:
                probs = np.load(path).astype(np.float32)
                case = cases[name]
                scored = [{"members": members, "steps": steps, "run": str(run), "fold": fold, "case": name,
                           **post.as_dict(), "bridge_um": post.bridge_um, **s}
                          for post, s in score_settings(probs, case.gold(), case.spacing, grid)]
                cache.parent.mkdir(exist_ok=True)
                write_text_atomic(cache, json.dumps({"key": key, "rows": scored}))
            rows += scored
            print(f"{run.name} {name}: best F1 {max(r['F1'] for r in scored):.3f}")
    return rows


SETTING = ("members", "steps", "threshold", "bridge_um", "dust_voxels", "keep_largest")
METRICS = ("PRE", "REC", "F1", "SD", "SSD")
TABLE_HEAD = ["| networks | steps | threshold | bridge um | dust | keep_largest | PRE | REC | F1 | SD | SSD | "
              "s on 256^3 |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]


def variant(s: dict) -> str:
    return f"{s['steps']} steps" + (f", {s['members']} seeds averaged" if s["members"] > 1 else "")


def table_row(s: dict) -> str:
    kind = f"average of {s['members']}" if s["members"] > 1 else "one"
    return (f"| {kind} | {s['steps']} | {s['threshold']} | {s['bridge_um']:g} | {s['dust_voxels']} | "
            f"{s['keep_largest']} | {s['PRE']:.3f} | "
            f"{s['REC']:.3f} | {s['F1']:.3f} | {s['SD']:.2f} | {s['SSD']:.2f} | {seconds_cell(s)} |")


def seconds_cell(s: dict) -> str:
    seconds = s.get("seconds_256", float("nan"))
    if seconds != seconds:  # NaN: no budget applied
        return "-"
    return f"{seconds:.0f}" + (" (over budget)" if s.get("over_budget") else "")


def inference_seconds(bench: Path, members: int) -> float:
    """Seconds to segment a 256^3 volume on 2 cores with ``members`` networks averaged: the measured
    wide-window time of one network (``bench_segmentation.json``) times the members (each member runs every
    window; the bench measured 2.91x for three)."""
    if not Path(bench).exists():
        raise InputError("bench JSON not found; run `python -m bench.run -k segmentation --json <file>`", bench)
    cases = {c["case"]: c for c in json.loads(Path(bench).read_text())}
    one = cases.get(SINGLE_BENCH_CASE)
    if one is None:
        raise InputError(f"{bench}: no {SINGLE_BENCH_CASE!r} entry; run `python -m bench.run -k segmentation "
                         f"--json {bench}`")
    return members * float(one["median_s"])


def summarise(rows: list[dict], n_cases: int, seconds_of: Callable[[int], float] | None = None,
              budget_s: float | None = None) -> tuple[list[dict], dict]:
    """Means per setting over the held-out cases and the choice. Several runs of one setting and case (seeds)
    are averaged first, so every case weighs the same; settings missing a case are dropped.

    ``seconds_of(members)`` with ``budget_s``: settings whose inference on 256^3 takes longer than the budget
    (30 s on 2 cores) stay in the summary, marked ``over_budget``, but cannot be chosen."""
    groups: dict[tuple, dict[str, list[dict]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in SETTING), {}).setdefault(r["case"], []).append(r)
    summary = [{**dict(zip(SETTING, k, strict=True)), "cases": len(per_case),
                **{m: float(np.mean([np.mean([r[m] for r in rs]) for rs in per_case.values()])) for m in METRICS}}
               for k, per_case in groups.items() if len(per_case) == n_cases]
    if not summary:
        raise InputError(f"no setting was scored on all {n_cases} held-out cases")
    for s in summary:
        s["seconds_256"] = seconds_of(s["members"]) if seconds_of else float("nan")
        s["over_budget"] = bool(budget_s is not None and seconds_of and s["seconds_256"] > budget_s)
    allowed = [s for s in summary if not s["over_budget"]]
    if not allowed:
        raise InputError(f"every setting is over the {budget_s} s inference budget")
    from neurorefiner.postprocessing.choose import choose_setting

    chosen = choose_setting(allowed)
    summary.sort(key=lambda s: (-s["F1"], s["SSD"]))
    return summary, chosen


def _shown(path: Path | None, base: Path) -> str:
    """``path`` relative to ``base`` where it lies below it (as the tables cite their inputs)."""
    if path is None:
        return "-"
    path, base = Path(path).resolve(), Path(base).resolve()
    return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)


def choose(runs: list[Path], out: Path, thresholds: tuple[float, ...] = THRESHOLDS,
           budget_s: float | None = SPEED_BUDGET_S, bench: Path | None = None, dust: tuple[int, ...] = DUST,
           keep: tuple[int, ...] = KEEP, bridge: tuple[float, ...] = BRIDGE) -> str:
    """Score, choose and write ``cv_dev.md``, ``cv_dev_cases.csv`` and ``choice.json`` under ``out``; returns
    the head of the markdown (rule, speed, choice)."""
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.postprocessing.choose import TIE_F1

    if budget_s is not None and bench is None:
        raise InputError("a speed budget needs the bench JSON with the one-network time (--bench)")
    held = sorted({c for r in runs for c in FOLDS[parse_run(r)[0]]})
    # read the bench once, before hours of tracing could end in its error
    one_network_s = inference_seconds(bench, 1) if budget_s is not None else float("nan")
    rows = score_runs(runs, thresholds, dust, keep, bridge)
    seconds_of = (lambda members: members * one_network_s) if budget_s is not None else None
    summary, chosen = summarise(rows, len(held), seconds_of, budget_s)
    out.mkdir(parents=True, exist_ok=True)
    write_rows_csv(out / "cv_dev_cases.csv", rows)
    variants = sorted({(s["members"], s["steps"]) for s in summary})
    best_of = {v: next(s for s in summary if (s["members"], s["steps"]) == v) for v in variants}
    seeds = {v: sorted({r["run"] for r in rows if (r["members"], r["steps"]) == v}) for v in variants}
    lines = ["# Steps and post-processing of the CPU 3D U-Net, cross-validated on DIADEM dev", "",
             f"Out-of-fold masks of {', '.join(held)} (three folds, each network trained on the other four dev "
             "cases, last checkpoint, wide windows) -> APP2 -> PRE/REC/F1 (tau 4 voxels), SD/SSD in voxels; "
             f"means over the {len(held)} held-out cases (a single network's figures are first averaged over "
             f"the seeds run). Thresholds {', '.join(map(str, thresholds))}; gap bridging "
             f"{', '.join(f'{b:g}' for b in bridge)} um; dust {', '.join(map(str, dust))}; keep largest "
             f"{', '.join(map(str, keep))}. Rule: the highest mean F1; settings "
             f"within {TIE_F1} of it go to the lower mean SSD, then the simpler setting (one network before an "
             "average). OP_7-OP_9 are not used.", "",
             (f"Speed: settings whose inference on a 256^3 volume (2 cores, wide windows) would exceed the "
              f"{budget_s:g} s budget are listed but cannot be chosen; seconds = networks averaged x one network's "
              f"measured time ({_shown(bench, out.parent)}: "
              f"{one_network_s:.1f} s). Over budget: "
              + (", ".join(sorted({f"{variant(s)} ({s['seconds_256']:.0f} s)" for s in summary
                                   if s["over_budget"]})) or "none") + "."
              if budget_s is not None else "Speed: no inference budget applied (--no-speed-budget)."), "",
             f"**Chosen: {variant(chosen)}, threshold {chosen['threshold']}, gap bridging {chosen['bridge_um']:g} "
             f"um, dust {chosen['dust_voxels']} "
             f"voxels, keep_largest {chosen['keep_largest']}** (F1 {chosen['F1']:.3f}, SSD {chosen['SSD']:.2f})", "",
             "Runs: " + "; ".join(f"{variant(best_of[v])}: {', '.join(seeds[v])}" for v in variants), "",
             "Best setting per variant:", "", *TABLE_HEAD]
    lines += [table_row(best_of[v]) for v in variants]
    lines += ["", "Per held-out case, each variant with its best setting above (F1 / SSD; mean over seeds):", "",
              "| case | " + " | ".join(variant(best_of[v]) for v in variants) + " |",
              "|---|" + "---|" * len(variants)]
    for case in held:
        cells = []
        for v in variants:
            rs = [r for r in rows if r["case"] == case and all(r[k] == best_of[v][k] for k in SETTING)]
            cells.append(f"{np.mean([r['F1'] for r in rs]):.3f} / {np.mean([r['SSD'] for r in rs]):.1f}"
                         if rs else "-")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    lines += ["", "Every setting (means over the held-out cases), best F1 first:", "", *TABLE_HEAD]
    lines += [table_row(s) for s in summary]
    write_markdown(out / "cv_dev.md", "\n".join(lines) + "\n")
    choice = {k: chosen[k] for k in (*SETTING, "F1", "SSD")}
    if budget_s is not None:
        choice |= {"seconds_256": round(chosen["seconds_256"], 1), "speed_budget_s": budget_s}
    write_text_atomic(out / "choice.json", json.dumps(choice, indent=1) + "\n")
    return "\n".join(lines[:16])


