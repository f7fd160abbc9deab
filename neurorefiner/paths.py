"""Where things live. Never relative to the working directory: Hydra changes it, users run from anywhere."""

from __future__ import annotations

import os
import re
from pathlib import Path


def project_root() -> Path:
    """The checkout root (holds data/, conf/); ``PROJECT_ROOT`` overrides."""
    env = os.environ.get("PROJECT_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """Bundled and user data; ``NEUROREFINER_DATA`` overrides."""
    env = os.environ.get("NEUROREFINER_DATA")
    return Path(env).resolve() if env else project_root() / "data"


def cache_dir() -> Path:
    """Generated data (synthetic benchmarks, initial masks); git-ignored."""
    env = os.environ.get("NEUROREFINER_CACHE")
    return Path(env).resolve() if env else data_dir() / "cache"


def conf_dir() -> Path:
    return project_root() / "conf"


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def is_segmenter_file(segmenter: str) -> bool:
    """Whether ``segmenter`` is given as an explicit path (it has a folder part or a checkpoint suffix)
    rather than as the name of a shipped segmenter."""
    return "/" in segmenter or "\\" in segmenter or segmenter.endswith((".pt", ".ckpt"))


def segmenter_dirname(segmenter: str) -> str:
    """The folder name a segmenter's cached masks and rows go under. A plain name stays itself; an explicit
    checkpoint file (which must exist) gets ``<stem>-<digest of its absolute path>``. Anything else (``..``,
    a path to nowhere) is refused: the name is joined into cache and checkpoint paths, and
    ``segmenter=../../../elsewhere/evil`` would otherwise read or write outside them."""
    from neurorefiner.errors import InputError

    name = str(segmenter)
    if is_segmenter_file(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise InputError("segmenter names a checkpoint file that does not exist; give a shipped segmenter's "
                             "name (e.g. unet3d) or an existing checkpoint file", path)
        import hashlib

        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
        return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', path.stem)}-{digest}"
    if not _PLAIN_NAME.match(name) or ".." in name:
        raise InputError(f"segmenter {name!r} is not a plain name (letters, digits, '_', '-', '.'); give a "
                         "shipped segmenter's name or an existing checkpoint file")
    return name


def init_mask_dir(dataset: str, segmenter: str, root: str | Path | None = None) -> Path:
    """Folder of one segmenter's initial masks M_init of a dataset: ``<root>/<dataset>/<segmenter>``, with
    ``root`` by default ``<cache_dir()>/init_masks``. The one place that knows this layout (the writer in
    ``inference.init_masks``, the stage-2 miner and the evaluation runner all read it)."""
    return Path(root if root is not None else cache_dir() / "init_masks") / dataset / segmenter_dirname(segmenter)


def init_mask_path(dataset: str, segmenter: str, case: str, root: str | Path | None = None) -> Path:
    """One case's initial mask (TIFF) in :func:`init_mask_dir`."""
    return init_mask_dir(dataset, segmenter, root) / f"{case}.tif"


def tree_state(ignore: str | Path | None = None) -> tuple[str, bool]:
    """(short commit of the project's checkout, whether tracked files have uncommitted changes): the
    provenance every shipped table and checkpoint card records ("unknown" outside a git checkout).
    ``ignore``: a folder whose own changes do not count, the table a run rewrites itself (its second command,
    on the other segmenter's rows, used to find the first one's table and call the tree dirty)."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=project_root(), capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = [line for line in git("diff", "--name-only", "HEAD").splitlines() if line]
    if ignore is not None and changed:
        top = Path(git("rev-parse", "--show-toplevel") or project_root()).resolve()
        skip = Path(ignore).resolve()
        changed = [f for f in changed if skip != (top / f).resolve() and skip not in (top / f).resolve().parents]
    return commit, bool(changed)


def git_commit(ignore: str | Path | None = None) -> str:
    """The short commit, with ``+dirty`` when tracked files (outside ``ignore``) have uncommitted changes."""
    commit, dirty = tree_state(ignore)
    return commit + ("+dirty" if dirty else "")
