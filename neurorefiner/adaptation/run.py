"""``adapt(settings, out)``: run the steps of :mod:`.steps` in order into one folder, skipping those its record
says are finished, then write the card. What ``neurorefiner adapt`` calls.

The cheap checks come first (the dataset, its gold, where each segmenter's masks come from), before the folder is
claimed: a run refused there leaves nothing behind, so a retry with other settings is not blocked."""

from __future__ import annotations

import logging
import resource
import time
from pathlib import Path

from neurorefiner.adaptation.settings import AdaptSettings
from neurorefiner.adaptation.state import AdaptFolder, say
from neurorefiner.errors import InputError

log = logging.getLogger(__name__)
CARD = "README.md"


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for (the shard workers, the training run)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def adapt(settings: AdaptSettings, out: Path, progress: bool = True) -> Path:
    """Adapt the refiner to ``settings.dataset`` into ``out``; returns the card's path."""
    from tqdm import tqdm

    from neurorefiner.adaptation.card import adapted_card
    from neurorefiner.adaptation.settings import check_dataset, check_gold
    from neurorefiner.adaptation.steps import PRODUCTS, STEPS
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.paths import git_commit

    check_dataset(settings.dataset)
    check_gold(settings.dataset)
    check_mask_sources(settings)
    folder = AdaptFolder(Path(out))
    folder.claim(settings.record(), AdaptSettings(settings.dataset).record())
    bar = tqdm(STEPS.items(), total=len(STEPS), desc=f"adapt {settings.dataset}", unit="step",
               disable=not progress)
    for name, step in bar:
        bar.set_postfix_str(name)
        if folder.done(name):
            missing = [p for p in PRODUCTS.get(name, lambda *_: [])(settings, folder) if not p.exists()]
            if not missing:
                log.info("adapt %s: %s already done", settings.dataset, name)
                continue
            log.warning("adapt %s: %s is recorded as done but %d of its files are gone (first: %s); making it "
                        "again", settings.dataset, name, len(missing), missing[0])
        wall, cpu = time.time(), _cpu_seconds()
        try:
            details = step(settings, folder)
        except KeyboardInterrupt:  # Ctrl-C: say where the run stands (the command line alone exits 130 silently)
            bar.close()
            say(f"adapt {settings.dataset}: stopped during the {name} step; run the same command again to resume "
                "(finished steps are kept" + (", the editor goes on from its last checkpoint)" if name == "editor"
                                              else ")"))
            raise
        folder.finish(name, time.time() - wall, _cpu_seconds() - cpu, details)
    card = folder.root / CARD
    write_text_atomic(card, adapted_card(folder.read(), str(out), git_commit()))
    return card


def check_mask_sources(settings: AdaptSettings) -> None:
    """Each segmenter's masks of the training and validation stacks can be had: a checkpoint makes them (the
    dataset's shipped one; a lab's own stacks: the one their cached masks were made with, else the DIADEM U-Net,
    :func:`~neurorefiner.inference.init_masks.default_checkpoint`), or they are all in the initial-mask cache
    already. Else one :class:`InputError` saying where to put them, before the folder is claimed."""
    import dataclasses

    from neurorefiner.adaptation.steps import _mask_files
    from neurorefiner.inference.init_masks import NAIVE, default_checkpoint

    for seg in settings.segmenters:
        if seg == NAIVE or default_checkpoint(seg, settings.dataset).exists():
            continue
        missing = [p for p in _mask_files(dataclasses.replace(settings, segmenters=(seg,)), None) if not p.exists()]
        if missing:
            raise InputError(f"--segmenters {seg}: no checkpoint makes its masks of {settings.dataset}, and "
                             f"{len(missing)} of them are not here (first: {missing[0].name}); put your "
                             "segmenter's masks here as <case>.tif (data/README.md), or make them with `neurorefiner "
                             f"init-masks --dataset {settings.dataset} --segmenter {seg} --model <checkpoint> "
                             "--split <split>`", missing[0].parent)
