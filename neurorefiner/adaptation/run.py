"""``adapt(settings, out)``: run the steps of :mod:`.steps` in order into one folder, skipping those its record
says are finished, then write the card. What ``neurorefiner adapt`` calls."""

from __future__ import annotations

import logging
import resource
import time
from pathlib import Path

from neurorefiner.adaptation.settings import AdaptSettings
from neurorefiner.adaptation.state import AdaptFolder

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
    from neurorefiner.adaptation.settings import check_dataset
    from neurorefiner.adaptation.steps import PRODUCTS, STEPS
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.paths import git_commit

    check_dataset(settings.dataset)
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
        details = step(settings, folder)
        folder.finish(name, time.time() - wall, _cpu_seconds() - cpu, details)
    card = folder.root / CARD
    write_text_atomic(card, adapted_card(folder.read(), str(out), git_commit()))
    return card
