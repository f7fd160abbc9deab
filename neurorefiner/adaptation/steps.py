"""The steps of an adaptation, in order, each a function of the run's settings and folder.

Why these steps: the paper trains TopoRefineNet on each benchmark's own data (stage 1: defects cut into its gold;
stage 2: its segmenters' mistakes) and our judge learns which candidate edits are right from gold of the same
kind of stacks. A refiner trained on DIADEM alone refuses the removals and misses the breaks of other data, so
every step here reads only the dataset's training (and validation) splits, never its test split.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neurorefiner.adaptation.settings import AdaptSettings, check_dataset
from neurorefiner.adaptation.state import AdaptFolder
from neurorefiner.errors import InputError

EDITOR = "editor.ckpt"
JUDGE = "judge.json"


def make_masks(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
    """Each segmenter's masks of the training and validation cases, in the shared initial-mask cache (a mask
    made before, by ``neurorefiner init-masks`` or a table, is reused)."""
    from neurorefiner.inference.init_masks import write_init_masks

    train, val = check_dataset(settings.dataset)
    counts = {}
    for seg in settings.segmenters:
        for split in (s for s in (train, val) if s):
            counts[f"{seg}/{split}"] = len(write_init_masks(settings.dataset, seg, None, split, progress=True))
    return {"masks": counts}


def _shard_settings(settings: AdaptSettings, stage: int, seed: int):  # type: ignore[no-untyped-def]
    from neurorefiner.data.shard_folder import ShardSettings

    return ShardSettings(stage=stage, seed=seed, faint_gap=settings.faint_gap if stage == 1 else 0.0)


def make_stage_shards(stage: int) -> Callable[[AdaptSettings, AdaptFolder], dict[str, Any]]:
    """The step that writes stage ``stage``'s shards (1: defects cut into gold; 2: the segmenters' own errors),
    training and validation parts, under ``work/shards/stage<stage>/``."""

    def step(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
        from neurorefiner.data.shard_makers import make_shards

        n_train = settings.stage1_samples if stage == 1 else settings.stage2_samples
        out = {}
        for part, n, seed in (("train", n_train, settings.seed), ("val", settings.val_samples, settings.seed + 1)):
            manifest = make_shards(folder.work / "shards" / f"stage{stage}" / part, stage, [settings.dataset], n,
                                   part, list(settings.segmenters), None, _shard_settings(settings, stage, seed),
                                   shard_size=256, workers=2)
            out[part] = {"samples": manifest["n_samples"], "counts": manifest["counts"]}
        return {"shards": out}

    step.__name__ = f"make_stage{stage}_shards"
    return step


def _train(command: list[str], made: Path, what: str, again: str) -> None:
    """Run one ``python train.py ...`` line in its own process (Hydra stays at the edge; a cut run resumes from
    its last state) and check it left ``made``; else one error naming the folder, the run's messages above it."""
    from neurorefiner.paths import project_root

    run = subprocess.Popen([sys.executable, *command[1:]], cwd=project_root())
    try:
        code = run.wait()
    except KeyboardInterrupt:  # the run got the Ctrl-C too: it saves where it stands, so it is given time to
        try:  # (subprocess.run would kill it a quarter second later, before its checkpoint is written)
            run.wait(timeout=120)
        except BaseException:  # a second Ctrl-C, or a run that does not stop
            run.kill()
            run.wait()
        raise
    if code != 0 or not made.exists():
        raise InputError(f"{what} stopped (exit code {code}); its messages are above. "
                         f"Run the same command again to {again}", made.parent)


def editor_command(settings: AdaptSettings, folder: AdaptFolder) -> list[str]:
    """The ``train.py`` line of the editor step (also written in the card: it retrains the editor alone)."""
    return ["python", "train.py", "experiment=adapt_editor", f"dataset={settings.dataset}",
            f"adapt_dir={folder.root.resolve()}", f"stages.2.max_steps={settings.editor_steps}",
            f"seed={settings.seed}"]


def editor_run_dir(folder: AdaptFolder) -> Path:
    """Where the editor's training keeps its ``last.ckpt`` while it runs (``training.refiner.run_state_dir`` of
    :func:`editor_command`'s configuration)."""
    return folder.work / "editor" / "runs" / "refine" / Path(EDITOR).stem


def train_editor(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
    """Fine-tune the shipped editor on the shards (``conf/experiment/adapt_editor.yaml``) in its own process, as
    ``train.py`` runs it (Hydra stays at the edge); a cut run resumes from its last state, and says so."""
    import json

    from neurorefiner.adaptation.state import say

    command = editor_command(settings, folder)
    made = folder.work / "editor" / EDITOR
    last = editor_run_dir(folder) / "last.ckpt"
    if last.exists():
        say(f"adapt {settings.dataset}: the editor resumes from its last checkpoint{_step_of(last, settings)} "
            f"({last})")
    _train(command, made, "the editor's training", "resume it")
    shutil.copyfile(made, folder.root / EDITOR)
    shutil.copyfile(made.with_suffix(".json"), (folder.root / EDITOR).with_suffix(".json"))
    metrics = json.loads(made.with_suffix(".json").read_text())
    return {"command": " ".join(command), "steps": int(metrics.get("train/steps", 0)),
            "validation": {k: round(float(v), 4) for k, v in metrics.items() if k.startswith("val/")}}


def _step_of(last: Path, settings: AdaptSettings) -> str:
    """`` at step N of M`` as ``last`` records it ('' when it cannot be read: the run itself says why)."""
    from neurorefiner.io.checkpoints import load_checkpoint

    try:
        return f" at step {int(load_checkpoint(last)['global_step'])} of {settings.editor_steps}"
    except (InputError, KeyError, TypeError, ValueError):
        return ""


def train_judge(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
    """The learned agents' judge, trained on the training cases' candidates under each segmenter's masks (the
    validation cases stay unseen, for checking the refiner)."""
    from neurorefiner.adaptation.judge.training import train_judge as fit

    train, _ = check_dataset(settings.dataset)
    path, card = fit(settings.dataset, train, list(settings.segmenters), str(folder.root / JUDGE), augment=2,
                     progress=True, min_support=settings.judge_min_support, tree_root=settings.judge_tree_root,
                     reach_um=settings.judge_reach_um)
    return {"judge": path.name, "card": Path(card).name}


def train_baselines(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
    """Each asked-for learned refinement baseline trained from scratch on the dataset's stage-1 defects (their own
    recipe, ``conf/experiment/<name>.yaml``, with this dataset), copied to ``<folder>/<name>.ckpt``."""
    made = {}
    for name in settings.baselines:
        command = ["python", "train.py", f"experiment={name}", f"dataset={settings.dataset}",
                   f"paths.checkpoint_dir={(folder.work / 'baselines').resolve()}",
                   f"baseline.max_steps={settings.baseline_steps}", "trainer.max_time=00:01:00:00",
                   f"seed={settings.seed}"]
        ckpt = folder.work / "baselines" / f"{name}.ckpt"
        _train(command, ckpt, f"the {name} baseline's training", "continue")
        for suffix in (".ckpt", ".json", ".md"):
            if ckpt.with_suffix(suffix).exists():
                shutil.copyfile(ckpt.with_suffix(suffix), folder.root / f"{name}{suffix}")
        made[name] = " ".join(command)
    return {"baselines": made}


def choose_policy(settings: AdaptSettings, folder: AdaptFolder) -> dict[str, Any]:
    """The last step: the refiner's decision policy chosen on the validation data by root-seeded F1, classical
    among the choices (:mod:`neurorefiner.adaptation.choose`); writes ``plans.json`` and ``choose.md``."""
    from neurorefiner.adaptation.choose import choose_refiner

    return choose_refiner(settings.dataset, folder.root, settings.segmenters, progress=True)


def _mask_files(settings: AdaptSettings, folder: AdaptFolder) -> list[Path]:
    from neurorefiner.data import get_dataset
    from neurorefiner.inference.init_masks import mask_dir

    ds, splits = get_dataset(settings.dataset), [s for s in check_dataset(settings.dataset) if s]
    names = [case.name for split in splits for case in ds.cases(split)]
    return [mask_dir(settings.dataset, seg) / f"{name}.tif" for seg in settings.segmenters for name in names]


def _shard_files(stage: int) -> Callable[[AdaptSettings, AdaptFolder], list[Path]]:
    return lambda settings, folder: [folder.work / "shards" / f"stage{stage}" / part / "manifest.json"
                                     for part in ("train", "val")]


PRODUCTS: dict[str, Callable[[AdaptSettings, AdaptFolder], list[Path]]] = {
    "masks": _mask_files,
    "stage1_shards": _shard_files(1),
    "stage2_shards": _shard_files(2),
    "editor": lambda settings, folder: [folder.root / EDITOR],
    "judge": lambda settings, folder: [folder.root / JUDGE],
    "baselines": lambda settings, folder: [folder.root / f"{name}.ckpt" for name in settings.baselines],
    "choose": lambda settings, folder: [folder.root / "plans.json", folder.root / "choose.md"],
}
"""The files each step leaves behind. Why: the shards and masks live in ignored folders (``work/``, the mask
cache), so a fresh checkout of a shipped refiner holds its record but not them; a step whose files are gone is
made again rather than trusted from the record (Table 6 on a preset trains on that preset's shards)."""

STEPS: dict[str, Callable[[AdaptSettings, AdaptFolder], dict[str, Any]]] = {
    "masks": make_masks,
    "stage1_shards": make_stage_shards(1),
    "stage2_shards": make_stage_shards(2),
    "editor": train_editor,
    "judge": train_judge,
    "baselines": train_baselines,
    "choose": choose_policy,
}
