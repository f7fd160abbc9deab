"""The editor probe's report: the headline figures against the editor's targets, and ``editor_probe.md`` with
the summary and per-edit CSVs (each stamped with date and commit). Kept apart from the measuring
(:mod:`.editor_probe`) so a change of wording or targets never touches how an edit is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurorefiner.studies.editor_probe import DECODINGS


def fmt(v: Any) -> str:
    """One cell of the report: ``-`` for a figure with no edits behind it, floats to three decimals."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


TARGETS = [  # (label, kind, variant, decoding, field, target text)
    ("breaks reconnected", "break", "correct", "topology", "reconnected", ">= 0.90"),
    ("break gap filled", "break", "correct", "topology", "gap_filled", ">= 0.80"),
    ("break false merges", "break", "correct", "topology", "false_merge", "<= 0.02"),
    ("noise removed (>= 90 % of its voxels)", "noise", "correct", "topology", "noise_removed", ">= 0.95"),
    ("pasted fragments removed", "paste", "correct", "topology", "noise_removed", ">= 0.95"),
    ("noise on a crossing neurite removed", "crossing", "correct", "topology", "noise_removed", ">= 0.95"),
    ("crossing: edits removing no true voxel", "crossing", "correct", "topology", "true_removed_zero",
     "1.00"),
    ("raw network gap filled", "break", "correct", "raw", "gap_filled", ">= 0.60"),
    ("real breaks (segmenter) reconnected", "real_break", "correct", "topology", "reconnected", ">= 0.90"),
    ("real breaks (segmenter) gap filled", "real_break", "correct", "topology", "gap_filled", ">= 0.80"),
    ("real breaks (segmenter) false merges", "real_break", "correct", "topology", "false_merge", "<= 0.02"),
    ("real breaks (segmenter) raw gap filled", "real_break", "correct", "raw", "gap_filled", ">= 0.60"),
    ("real noise (segmenter) removed", "real_noise", "correct", "topology", "noise_removed", ">= 0.95"),
    ("real noise (segmenter): edits removing no true voxel", "real_noise", "correct", "topology",
     "true_removed_zero", "1.00"),
]


TEXT_EFFECT = [  # (kind, field, decoding, label): what the instruction's text and place add
    ("break", "gap_filled", "raw", "break gap filled (raw)"),
    ("break", "gap_filled", "network", "break gap filled (network alone, unconfined)"),
    ("break", "reconnected", "topology", "breaks reconnected (decoded)"),
    ("real_break", "gap_filled", "raw", "real break gap filled (raw)"),
    ("noise", "noise_removed", "raw", "noise removed (raw)"),
]


def headline(summary: Sequence[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    """The figures the editor's targets name, plus the wrong-location / opposite no-change shares."""
    index = {(s["kind"], s["variant"], s["decoding"]): s for s in summary}
    out = []
    for label, kind, variant, decoding, fieldname, target in TARGETS:
        s = index.get((kind, variant, decoding))
        out.append((label, None if s is None else s[fieldname], target))
    for kind, fieldname, decoding, what in TEXT_EFFECT:
        right, const = index.get((kind, "correct", decoding)), index.get((kind, "constant", decoding))
        gain = None if right is None or const is None or right[fieldname] is None or const[fieldname] is None \
            else right[fieldname] - const[fieldname]
        out.append((f"right minus constant instruction: {what}", gain, ">= 0.10" if decoding != "topology" else ">= 0"))
    for variant in ("wrong_location", "opposite"):
        for decoding in DECODINGS:
            rs = [s for s in summary if s["variant"] == variant and s["decoding"] == decoding]
            n = sum(s["edits"] for s in rs)
            share = sum(s["unchanged"] * s["edits"] for s in rs) / n if n else None
            out.append((f"{variant.replace('_', ' ')}: no change ({decoding})", share, ">= 0.95"))
    return out


SUMMARY_FIELDS = ["kind", "variant", "decoding", "edits", "unchanged", "reconnected", "gap_filled",
                  "false_merge", "noise_removed", "noise_removed_share", "true_removed_mean", "true_removed_zero"]


def write_report(out_dir: Path, rows: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]],
                 meta: dict[str, Any], speed: dict[str, float] | None = None) -> list[Path]:
    """``editor_probe.md`` (setup, headline vs targets, full table, speed), ``editor_probe.csv``
    (the summary) and ``editor_probe_edits.csv`` (one row per edit), each with date and commit."""
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = {"date": meta["date"], "commit": meta["commit"]}
    paths = []
    for name, fields_, data in (("editor_probe.csv", SUMMARY_FIELDS, summary),
                                ("editor_probe_edits.csv", list(rows[0]) if rows else [], rows)):
        cells = [{**{k: fmt(r.get(k)) if isinstance(r.get(k), float) else r.get(k) for k in fields_}, **stamp}
                 for r in data]
        paths.append(write_rows_csv(out_dir / name, cells, [*fields_, "date", "commit"]))
    lines = ["# Editor probe: does TopoRefiner do what it is told?", "",
             f"Made {meta['date']} at commit {meta['commit']} by `{meta['command']}`.", "",
             f"Data (development only): {meta['data']}. Blocks {meta['size']} (z, y, x), {meta['n_per_kind']} "
             f"defects per kind ({', '.join(meta['kinds'])}), seed {meta['seed']}; checkpoint "
             f"`{meta['checkpoint']}`; network pass on a crop of {meta.get('crop_margin')} context voxels around "
             f"the named place (None = the whole block); decoding settings {meta['decoding_config']}.", "",
             *([meta["real"], ""] if meta.get("real") else []),
             "Each defect is edited with the correct instruction, the same operation at a wrong place and the "
             "opposite operation at the right place, decoded raw (threshold + confinement of the network's "
             "pass on the whole block) and by topology (the network's pass on the crop around the named place, "
             "as the editor runs it). Real kinds are the segmenter's own breaks and noise against gold, put "
             "into the gold block one at a time. `unchanged` = share of edits that left the block as it was; "
             "`reconnected` = block Betti-0 down to gold's; `gap_filled` = share of the cut voxels restored; "
             "`false_merge` = share of edits joining gold components the input kept apart; `noise_removed` = "
             "share of edits removing >= 90 % of the noise voxels (`noise_removed_share`: mean share); "
             "`true_removed_*` = gold voxels of the input that the edit deleted (mean; share of edits with none).",
             "", "## Headline (correct instruction, decoded, unless said)", "", "| figure | value | target |",
             "|---|---|---|"]
    lines += [f"| {label} | {fmt(v)} | {t} |" for label, v, t in headline(summary)]
    if speed:
        lines += ["", "## Speed", "",
                  f"One edit of a {speed.get('shape')} block on {speed.get('threads')} torch thread(s) (median "
                  f"of {speed.get('repeats')}, interleaved; 1-minute load average {speed.get('load_before', 0):.1f}"
                  f" -> {speed.get('load_after', 0):.1f} on this shared machine, so wall times are inflated "
                  "and the ratios are the comparable figures):", "",
                  "| step | wall s | CPU s | wall / whole-block pass |", "|---|---|---|---|",
                  f"| network pass, whole block | {speed['raw_s']:.2f} | {speed.get('raw_cpu_s', 0):.2f} | 1.00 |",
                  f"| network pass, crop around the named place | {speed.get('crop_s', 0):.2f} | "
                  f"{speed.get('crop_cpu_s', 0):.2f} | {speed.get('crop_ratio', 0):.2f} |",
                  f"| decoded edit (crop pass + decoding) | {speed['decoded_s']:.2f} | "
                  f"{speed.get('decoded_cpu_s', 0):.2f} | {speed['ratio']:.2f} |", "",
                  "Target: decoded edit < 1.5 s on 2 cores."]
    lines += ["", "## All figures", "", "| " + " | ".join(SUMMARY_FIELDS) + " |",
              "|" + "---|" * len(SUMMARY_FIELDS)]
    lines += ["| " + " | ".join(fmt(s.get(k)) for k in SUMMARY_FIELDS) + " |" for s in summary]
    md = out_dir / "editor_probe.md"
    write_markdown(md, "\n".join(lines) + "\n")
    paths.append(md)
    return paths
