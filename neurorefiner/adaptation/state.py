"""The record an adaptation folder keeps of itself (``adapt.json``): the settings it was made with and every step
finished, with its wall time and CPU time. Why: a two-hour run on a shared laptop is stopped and started again;
the same command must skip what is done, and a command with other settings must not build on the folder's
half-made parts (it is refused, naming each setting that differs, unless no step has finished: a run that failed
at its start holds nothing to build on, and a retry with other settings starts it afresh)."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError
from neurorefiner.io.atomic import write_text_atomic

RECORD = "adapt.json"

log = logging.getLogger(__name__)


def say(message: str) -> None:
    """One line to the user on stderr, above any progress bar (the commands configure no logging)."""
    from tqdm import tqdm

    log.info(message)
    tqdm.write(message, file=sys.stderr)


@dataclass
class AdaptFolder:
    """An adaptation's output folder and its record."""

    root: Path

    @property
    def work(self) -> Path:
        """Scratch the run needs but a shipped refiner does not (shards, the editor's run state)."""
        return self.root / "work"

    def read(self) -> dict[str, Any]:
        path = self.root / RECORD
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text())
        except ValueError as exc:
            raise InputError(f"the adaptation record is not valid JSON ({exc}); remove the folder to start afresh",
                             path) from None

    def claim(self, settings: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start or continue the run of ``settings`` here; a folder made with other settings is refused, unless it
        finished no step (then it starts afresh under ``settings``, saying so, its ``work/`` removed). A setting
        the folder's record lacks (added to the command after the folder was made) counts as its value in
        ``defaults``, so an older folder continues under the newer command."""
        record = self.read()
        if record:
            before = {**(defaults or {}), **record.get("settings", {})}
            differ = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
            if differ and not record.get("steps"):  # a run that finished nothing: nothing here to build on
                told = ", ".join(f"{k} {before.get(k)!r}" for k in differ)
                say(f"{self.root}: the adaptation begun here with other settings ({told}) finished no step; "
                    "starting afresh with these" + (" (its work/ folder removed)" if self.work.exists() else ""))
                shutil.rmtree(self.work, ignore_errors=True)
            elif differ:
                told = "; ".join(f"{k}: {before.get(k)!r} here, {settings.get(k)!r} asked" for k in differ)
                raise InputError(f"this folder holds an adaptation made with other settings ({told}); use another "
                                 "--out, or the same settings to continue it", self.root)
            else:
                return record
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"settings": settings, "steps": {}}
        write_text_atomic(self.root / RECORD, json.dumps(record, indent=2))
        return record

    def done(self, step: str) -> bool:
        return step in self.read().get("steps", {})

    def finish(self, step: str, wall_s: float, cpu_s: float, details: dict[str, Any] | None = None) -> None:
        """Record ``step`` as finished (the last thing a step does, so a cut step runs again)."""
        record = self.read()
        record.setdefault("steps", {})[step] = {"wall_s": round(wall_s, 1), "cpu_s": round(cpu_s, 1),
                                                **(details or {})}
        write_text_atomic(self.root / RECORD, json.dumps(record, indent=2))


def check_refiner_dir(folder: str | Path | None) -> Path:
    """``refiner_dir=`` as a folder ``neurorefiner adapt`` made (:func:`~neurorefiner.io.refiner_plans.
    check_refiner_folder`, without asking for its plan: a run may be under way)."""
    from neurorefiner.io.refiner_plans import check_refiner_folder

    return check_refiner_folder(folder, need_plan=False)
