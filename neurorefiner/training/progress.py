"""A long training run's progress on disk: steps, wall and CPU time, steps per second, summed over resumes.

A budget on a shared CPU is spent in pieces (a background run stopped with the session, resumed in the
next). ``progress.json`` beside the run's ``last.ckpt`` says where it stands: the global step, the CPU
seconds of every piece so far (this process's, workers included), and the speed of the current piece, so
"N CPU-hours reached" is read, not estimated.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its finished children (data-loader workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class ProgressLog(L.Callback):
    """Write ``path`` (JSON) every ``every_n_steps`` training steps and at the end of fitting: global step,
    steps and CPU seconds of this piece and of all pieces (the file's previous totals carried over). With
    ``max_cpu_minutes`` the run stops once all its pieces together have spent that much CPU time."""

    def __init__(self, path: str | Path, every_n_steps: int = 50, max_cpu_minutes: float | None = None) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        if max_cpu_minutes is not None and max_cpu_minutes <= 0:
            raise ValueError(f"max_cpu_minutes must be > 0, got {max_cpu_minutes}")
        self.path, self.every = Path(path), int(every_n_steps)
        self.max_cpu_s = None if max_cpu_minutes is None else 60.0 * float(max_cpu_minutes)
        self.prior: dict[str, Any] = {}
        self.t0 = self.cpu0 = 0.0
        self.step0 = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        prior = json.loads(self.path.read_text()) if self.path.exists() else {}
        # the earlier pieces, the last one as it last wrote (a killed piece counts what it wrote last)
        self.prior = {"pieces": list(prior.get("pieces", [])) + ([prior["current"]] if prior.get("current") else [])}
        self.t0, self.cpu0, self.step0 = time.time(), cpu_seconds(), int(trainer.global_step)

    def state(self, trainer: L.Trainer) -> dict[str, Any]:
        wall, cpu = time.time() - self.t0, cpu_seconds() - self.cpu0
        steps = int(trainer.global_step) - self.step0
        done = self.prior.get("pieces", [])
        piece = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.t0)), "first_step": self.step0,
                 "steps": steps, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                 "steps_per_s": round(steps / wall, 4) if wall > 0 else None,
                 "steps_per_cpu_s": round(steps / cpu, 4) if cpu > 0 else None, "pid": os.getpid()}
        total_cpu = sum(p["cpu_s"] for p in done) + cpu
        return {"global_step": int(trainer.global_step), "cpu_hours_total": round(total_cpu / 3600, 3),
                "wall_hours_total": round((sum(p["wall_s"] for p in done) + wall) / 3600, 3),
                "updated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "current": piece,
                "pieces": done}

    def write(self, trainer: L.Trainer) -> None:
        if not trainer.is_global_zero:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state(trainer), indent=1))
        tmp.replace(self.path)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if int(trainer.global_step) % self.every == 0:
            self.write(trainer)
        if self.max_cpu_s is not None:  # a budget in CPU time: fair between variants of unequal step cost
            spent = sum(p["cpu_s"] for p in self.prior.get("pieces", [])) + cpu_seconds() - self.cpu0
            if spent >= self.max_cpu_s:
                trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write(trainer)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.write(trainer)


class SaveOnInterrupt(L.Callback):
    """On Ctrl-C, write the run's state to ``path`` (its ``last.ckpt``) before it stops, so the same command resumes
    from the step it was stopped at. Why: the timed saves (``checkpoint_minutes``) leave nothing in a run's first
    minutes and lose up to that much later; ``neurorefiner adapt`` stopped during its editor step used to train
    the editor again from step 0. One process only (a save on one rank of several would wait for the others)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if not isinstance(exception, KeyboardInterrupt) or trainer.world_size != 1 or trainer.global_step < 1:
            return
        from neurorefiner.io.atomic import atomic_path

        with atomic_path(self.path) as tmp:
            trainer.save_checkpoint(str(tmp))  # the whole state (optimizer included): weights alone do not resume
        print(f"stopped at step {trainer.global_step}; its state is in {self.path}: the same command resumes "
              "from there", file=sys.stderr)
