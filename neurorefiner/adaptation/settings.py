"""What an adaptation run is made of, checked before any work, and recorded in its folder.

Light on purpose (no torch): the command checks its options with :class:`AdaptSettings` before heavy imports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError
from neurorefiner.topology.tree_root import TREE_ROOTS

#: the splits an adaptation learns from; test splits are never read
TRAIN_SPLITS = ("train", "dev")
#: the fewest stacks with gold SWC (training and validation splits together) an adaptation learns and chooses on:
#: leaving one stack out to check on needs at least two others to learn from
MIN_GOLD_STACKS = 3
#: the learned refinement baselines an adaptation can train beside the refiner (conf/experiment/<name>.yaml)
BASELINES = ("segfix", "transfiner", "segrefiner")


@dataclass(frozen=True)
class AdaptSettings:
    """Every setting that shapes an adaptation's outputs. Why each default:

    - ``segmenters``: the masks whose mistakes stage 2 learns from and the judge is trained on; the shipped
      U-Net by default, because it is the one every dataset has (a lab adds its own segmenter's name once its
      masks sit in ``data/cache/init_masks/<dataset>/<segmenter>/``).
    - ``editor_steps`` 1500: about 25 minutes of one CPU core at the CPU crop size, most of the 2 CPU-hour budget
      left to the masks, the shards and the judge.
    - ``stage1_samples`` / ``stage2_samples``: enough distinct crops that 1500 steps of batch 2 see each about
      once (shards are cheap to make and cheap to read, and one pass avoids memorising a few crops).
    - ``faint_gap`` 0.5: segmenters break neurites where the signal fades; half of the synthetic breaks have the
      image faded across the gap so the editor learns to bridge them there.
    - ``judge_min_support`` 10: a threshold must admit ten candidates before its precision counts (a few stacks).
    - ``baselines``: the learned refinement baselines (SegFix-, Mask Transfiner-, SegRefiner-style) trained on the
      same data, so a table compares the adapted refiner with baselines that saw what it saw; none by default (a
      lab refining its own stacks needs only the refiner). ``baseline_steps`` 800: from scratch, twice the
      shipped DIADEM baselines' 400, for about the editor's share of the budget.
    - ``judge_tree_root`` / ``judge_reach_um``: which piece the judge learns the joins of and how far it looks
      (``train-judge --tree-root --reach-um``); the largest piece and the default reach unless a lab's runs are
      told the soma or its gaps are longer (on SYNTHETIC zbfwb: the root's piece at 16 um, chosen on val).
    """

    dataset: str
    segmenters: tuple[str, ...] = ("unet3d",)
    editor_steps: int = 1500
    stage1_samples: int = 1536
    stage2_samples: int = 1536
    val_samples: int = 64
    faint_gap: float = 0.5
    judge_min_support: int = 10
    baselines: tuple[str, ...] = ()
    baseline_steps: int = 800
    seed: int = 0
    judge_tree_root: str = "largest"
    judge_reach_um: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("editor_steps", "stage1_samples", "stage2_samples", "val_samples", "judge_min_support",
                     "baseline_steps"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"--{name.replace('_', '-')} {getattr(self, name)}: must be a whole number >= 1")
        if not self.segmenters:
            raise InputError("--segmenters: name at least one segmenter whose masks to learn from")
        unknown = sorted(set(self.baselines) - set(BASELINES))
        if unknown:
            raise InputError(f"--baselines {','.join(unknown)}: choose from {', '.join(BASELINES)}")
        if self.judge_tree_root not in TREE_ROOTS:
            raise InputError(f"--judge-tree-root {self.judge_tree_root}: choose from {', '.join(TREE_ROOTS)}")
        if self.judge_reach_um is not None and not float(self.judge_reach_um) > 0:
            raise InputError(f"--judge-reach-um {self.judge_reach_um}: must be a length in um > 0")
        if not 0.0 <= self.faint_gap <= 1.0:
            raise InputError(f"--faint-gap {self.faint_gap}: must be a share in [0, 1]")

    def record(self) -> dict[str, Any]:
        """The settings as the folder records them (lists, not tuples: what JSON gives back)."""
        out = asdict(self)
        out["segmenters"] = list(self.segmenters)
        out["baselines"] = list(self.baselines)
        return out


def check_dataset(name: str) -> tuple[str, str | None]:
    """The dataset's training split and its validation split (None: the last training case validates), or an
    :class:`InputError` naming the dataset or the missing split."""
    from neurorefiner.data.registry import available, get_dataset

    if name not in available():
        raise InputError(f"--dataset {name}: no such dataset; choose from {', '.join(available())}")
    splits = tuple(getattr(get_dataset(name), "splits", ()))
    train = next((s for s in TRAIN_SPLITS if s in splits), None)
    if train is None:
        raise InputError(f"--dataset {name}: it has no training split (splits {splits}); an adaptation learns "
                         f"from a {' or '.join(TRAIN_SPLITS)} split with gold SWC")
    return train, ("val" if "val" in splits else None)


def check_gold(name: str) -> list[str]:
    """The names of the dataset's training and validation stacks, each with its gold SWC, or one
    :class:`InputError`: naming the gold files that are missing, or saying the dataset is too small to choose on
    (fewer than :data:`MIN_GOLD_STACKS`). Why before anything: without gold the run used to make every mask and
    then stop in a shard worker with a traceback and a misleading word about memory."""
    from neurorefiner.data.registry import get_dataset

    train, val = check_dataset(name)
    ds = get_dataset(name)
    splits = [s for s in (train, val) if s]
    cases = [c for split in splits for c in ds.cases(split)]
    where = " and ".join(f"`{s}`" for s in splits) + (" splits" if len(splits) > 1 else " split")
    missing = [c for c in cases if c.swc_path is None or not Path(c.swc_path).is_file()]
    if missing:
        folder = Path(ds.base) / "swc" if hasattr(ds, "base") else None
        files = [f"{c.name}.swc" if folder else c.name for c in missing]
        shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
        raise InputError(f"--dataset {name}: no gold SWC for {len(missing)} of the {len(cases)} stacks of its {where} "
                         f"({shown}); an adaptation learns from gold reconstructions: put each stack's as "
                         "swc/<case>.swc (data/README.md)", folder)
    if len(cases) < MIN_GOLD_STACKS:
        raise InputError(f"--dataset {name}: too small to choose on: {len(cases)} stack(s) with gold SWC in its "
                         f"{where} ({', '.join(c.name for c in cases) or 'none'}); an adaptation needs at least "
                         f"{MIN_GOLD_STACKS} (it learns on some and checks on one left out)")
    return [c.name for c in cases]
