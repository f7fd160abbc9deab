"""Where training writes, and the one deliberate step that ships a checkpoint into ``checkpoints/``.

Training writes under ``outputs/`` (``paths.checkpoint_dir`` of ``conf/paths/train.yaml``): a plain
``python train.py +stage=1`` used to overwrite the tracked ``checkpoints/toporefinenet_stage1.ckpt``, so the
shipped editor, its card and every table made with it silently changed. A run that would write onto a shipped
file (one git tracks, or one directly in ``paths.shipped_dir`` outside its ``runs/`` scratch folder) is refused
before it trains. With ``ship=true`` the finished checkpoint and its card files (``.json``, ``.md`` beside it)
are copied into ``paths.shipped_dir`` at the same relative place.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from omegaconf import DictConfig

from neurorefiner.errors import InputError
from neurorefiner.paths import project_root

CARD_SUFFIXES = (".json", ".md")


def shipped_dir(cfg: DictConfig) -> Path:
    """The folder of shipped checkpoints (``paths.shipped_dir``, default ``<root>/checkpoints``)."""
    paths = cfg.get("paths") or {}
    return Path(str(paths.get("shipped_dir") or project_root() / "checkpoints")).resolve()


def is_tracked(path: Path) -> bool:
    """Whether git tracks ``path`` in the checkout (False outside a git checkout)."""
    try:
        run = subprocess.run(["git", "ls-files", "--error-unmatch", str(path)], cwd=project_root(),
                             capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


#: scratch folders inside the shipped folder: training runs' state (``runs/``) and an adapted refiner's half-made
#: parts (``refiners/<name>/work/``, git-ignored), where training may write
SCRATCH = ("runs", "work")


def is_shipped(cfg: DictConfig, path: Path) -> bool:
    """A shipped file: tracked by git, or in the shipped folder outside its scratch folders (:data:`SCRATCH`)."""
    p = Path(path).resolve()
    ship = shipped_dir(cfg)
    inside = ship in p.parents and not set(SCRATCH) & set(p.relative_to(ship).parts[:-1])
    return inside or (p.exists() and is_tracked(p))


def check_destination(cfg: DictConfig, *paths: Path) -> None:
    """Refuse, before any training, to write onto a shipped file: training's results go under outputs/ and
    shipping is the deliberate ``ship=true``."""
    for path in paths:
        if is_shipped(cfg, path):
            raise InputError("training would overwrite a shipped checkpoint; training writes under outputs/ "
                             "(paths.checkpoint_dir) and `ship=true` copies the finished checkpoint and its card "
                             "into checkpoints/", path)


def with_cards(path: Path) -> list[Path]:
    """A checkpoint and the card files written beside it."""
    return [path, *(path.with_suffix(s) for s in CARD_SUFFIXES if path.with_suffix(s).exists())]


def shipped_path(cfg: DictConfig, path: Path) -> Path:
    """Where ``ship=true`` puts a finished file: its place relative to ``paths.checkpoint_dir`` (or its name)
    inside :func:`shipped_dir`. One function, so the cards' rebuild lines can be checked against what ships."""
    base = Path(str(cfg.paths.checkpoint_dir)).resolve()
    src = Path(path).resolve()
    return shipped_dir(cfg) / (src.relative_to(base) if base in src.parents else Path(src.name))


def ship(cfg: DictConfig, files: Iterable[Path]) -> list[Path]:
    """Copy finished files into :func:`shipped_dir` at their place relative to ``paths.checkpoint_dir`` (or
    by name); returns the copies. Only with ``ship=true``: otherwise nothing is copied and the command that
    would ship them is printed."""
    files = [Path(f) for f in files]
    if not cfg.get("ship", False):
        print("trained checkpoint: " + ", ".join(str(f) for f in files)
              + "\n(not shipped: rerun with ship=true to copy it and its card into checkpoints/)")
        return []
    out = []
    for f in files:
        dest = shipped_path(cfg, f)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.resolve(), dest)
        out.append(dest)
    print("shipped: " + ", ".join(str(d) for d in out))
    return out
