"""An evaluation run's comparison figures, one per case (``<out_dir>/figures/<split>/<segmenter>/<case>.png``):
image, gold, the initial mask and each method's mask, drawn by :mod:`neurorefiner.evaluation.figures`.

Why projections are kept while the run goes: a figure needs only z-MIPs, and holding those instead of the
stacks keeps a run's memory at one volume. A volume whose rows were read back still gets its figure, from the
masks an earlier run saved; a method with no saved mask gets a panel that says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError
from neurorefiner.evaluation.figures import Panel, best_scores, write_comparison, zmip
from neurorefiner.evaluation.initial_masks import InitialMasks, MaskSource
from neurorefiner.evaluation.plan import Plan
from neurorefiner.io import read_mask
from neurorefiner.paths import segmenter_dirname


@dataclass
class Projections:
    """The z-MIPs a figure needs, kept instead of the stacks: (method or "" for the initial mask, case) ->
    mask MIP, and case -> (image MIP, stack shape)."""

    masks: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    images: dict[str, tuple[np.ndarray, tuple[int, ...]]] = field(default_factory=dict)

    def keep(self, name: str, case: Case, mask: np.ndarray, image: np.ndarray, init: np.ndarray | None) -> None:
        """Method ``name``'s mask of ``case``, with the case's image and initial mask the first time."""
        self.masks[(name, case.name)] = zmip(mask)
        self.images.setdefault(case.name, (zmip(image), tuple(image.shape)))
        if init is not None:
            self.masks.setdefault(("", case.name), zmip(init))


def write_run_figures(plan: Plan, rows: list[dict], mips: Projections, initial: InitialMasks) -> dict[str, Path]:
    """One comparison figure per case, read from the rows and the kept projections (or saved masks)."""
    return write_figures(plan.out_dir / "figures" / plan.split / segmenter_dirname(plan.segmenter), plan.cases,
                         plan.methods, {m: plan.mask_dir(m) for m in plan.methods}, rows, mips,
                         initial.for_figures(), plan.segmenter, plan.dataset)


def _initial_panel(case: Case, mips: Projections, initial: MaskSource | None, segmenter: str) -> Panel:
    """The initial mask's panel: kept by this run, else read from the segmenter's cache, else a note why not."""
    init = mips.masks.get(("", case.name))
    note = ""
    if init is None and initial is not None:
        try:
            # the source reads the segmenter's cached mask, never the image
            init = zmip(np.asarray(initial(case, None), bool))  # type: ignore[arg-type]
        except (InputError, FileNotFoundError) as exc:
            note = f"initial mask not available: {exc}"
    return Panel(f"initial mask ({segmenter})", init, None, note)


def write_figures(fig_dir: Path, cases: list[Case], methods: list[str], mask_dirs: dict[str, Path],
                  rows: list[dict], mips: Projections, initial: MaskSource | None, segmenter: str,
                  dataset: str) -> dict[str, Path]:
    """One comparison figure per case (``<fig_dir>/<case>.png``): image, gold, the initial mask and each
    method's mask, from the projections this run kept, else the masks an earlier run saved under
    ``mask_dirs[method]``; a method with neither gets a panel that says why. Returns case -> figure path."""
    out: dict[str, Path] = {}
    for case in cases:
        if case.name in mips.images:
            image, shape = mips.images[case.name]
        else:
            vol = case.image()
            image, shape = zmip(vol.normalized()), tuple(vol.shape)
        gold = zmip(case.label(shape))
        panels = [] if "initial" in methods else [_initial_panel(case, mips, initial, segmenter)]
        missing = []
        for name in methods:
            mip = mips.masks.get((name, case.name))
            note = ""
            if mip is None:
                path = mask_dirs[name] / f"{case.name}.tif"
                if path.exists():
                    mip = zmip(read_mask(path).load())
                else:
                    missing.append(f"{name} ({path})")
                    note = "mask not available:\nits rows were read back\nfrom a run that saved no mask"
            panels.append(Panel(name, mip, best_scores(rows, name, case.name), note))
        if missing:
            print(f"figure {case.name}: no saved mask for {', '.join(missing)}: their rows were read back from a "
                  "run with save_masks=false (or older); delete those rows to recompute them and get the panel")
        out[case.name] = write_comparison(
            fig_dir / f"{case.name}.png", image, gold, panels,
            title=f"{dataset} / {case.split} / {case.name}  (initial masks: {segmenter})")
    if out:
        print(f"figures: {fig_dir}")
    return out
