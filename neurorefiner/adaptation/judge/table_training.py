"""The one judge for every dataset, trained on the mined candidates of every dataset
(:mod:`neurorefiner.adaptation.judge.mining`), with its card."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from neurorefiner.adaptation.judge.model_fit import MIN_PRECISION, inner_threshold
from neurorefiner.agents.candidates import KINDS
from neurorefiner.agents.learned.judge import Judge


def train_table_judge(root: str | Path, out: str | Path, models: dict[str, str], epochs: int = 12,
                      command: str = "", datasets: Sequence[str] | None = None) -> tuple[Path, Path]:
    """The one judge for every dataset, from mined candidates (:mod:`neurorefiner.adaptation.judge.mining`):
    per kind a model of the type ``models`` names, trained on every mined dataset, its threshold chosen
    leave one dataset out (:func:`neurorefiner.adaptation.judge.model_fit.inner_threshold`, the rule its
    transfer figures were measured under). Written as ``out`` (``.pt`` when a model reads crops) and its card."""
    from neurorefiner.adaptation.judge.mining import load_table
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.paths import git_commit

    boosters, thresholds, prior, labelled = {}, {}, {}, {}
    for kind in KINDS:
        t = load_table(Path(root), kind, datasets)
        fams = t.families
        labelled[kind] = {str(f): [int((fams == f).sum()), int(t.y[fams == f].sum())] for f in sorted(set(fams))}
        prior[kind] = float(t.y.mean()) if len(t) else 0.0
        model, thr, _, _ = inner_threshold(models[kind], t, MIN_PRECISION[kind], epochs=epochs)
        if model is None:
            thresholds[kind] = 1.1
            continue
        boosters[kind], thresholds[kind] = model, float(thr)
    meta = {"trained_on": "mined candidates (neurorefiner make judge-candidates)", "root": str(root),
            "models": dict(models), "labelled": labelled, "commit": git_commit(), "command": command,
            "epochs": epochs}
    judge = Judge(boosters, thresholds, prior, meta)
    path = judge.save(Path(out))
    card = write_text_atomic(path.with_suffix(".md"), table_judge_card(judge, command))
    return path, card


def table_judge_card(judge: Judge, command: str) -> str:
    meta = judge.meta
    lines = ["# The judge of candidate edits (agent=learned): one judge for every dataset", "",
             "Scores every candidate edit (join / remove / prune) of a mask: the probability that gold agrees with "
             "it. A model that reads crops sees the image, the mask and the edit around the candidate on one "
             "physical grid (neurorefiner.agents.learned.crops) beside the hand features.", "",
             f"- Rebuilt by: `{command}` (after the mining lines of experiments/judge/run.sh)",
             f"- Models: {', '.join(f'{k}: {v}' for k, v in meta.get('models', {}).items())}; thresholds "
             f"{', '.join(f'{k}: {v:.3f}' for k, v in judge.thresholds.items())} (the lowest keeping neurorefiner."
             "adaptation.judge.model_fit.MIN_PRECISION on predictions for datasets the model did not see).",
             "- Labelled candidates (dataset: labelled, true): "
             + "; ".join(f"{k}: " + ", ".join(f"{f} {n} ({t})" for f, (n, t) in v.items())
                         for k, v in meta.get("labelled", {}).items()) + ".",
             "  Synthetic datasets are SYNTHETIC stand-ins (their generator's gold); DIADEM is dev OP_1-OP_6 only.",
             f"- Code: commit {meta.get('commit')}.", "",
             "Leave-one-dataset-out figures of every model type: experiments/judge/join/judge_transfer.md and "
             "experiments/judge/remove_prune/judge_transfer.md.", "",
             "Stored as a weights-only .pt (tensors, numbers, LightGBM text): loading runs no code."]
    return "\n".join(lines) + "\n"
