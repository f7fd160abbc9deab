"""Reading checkpoint files safely.

Every checkpoint in this project is read with ``torch.load(weights_only=True)``: tensors, numbers, strings
and containers only. A pickle can name any callable (``os.system`` among them) and plain ``torch.load``
calls it while reading, so a checkpoint downloaded from elsewhere could run code before any check of ours
sees it. Our writers store configs as plain dicts, so nothing we write needs more than weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError


def load_checkpoint(path: str | Path, what: str = "checkpoint") -> Any:
    """The content of ``path`` read with ``weights_only=True``; a missing file, a file that is not a PyTorch
    checkpoint, or one that carries Python objects beyond plain data -> :class:`InputError` naming it (and
    nothing in the file has run)."""
    import pickle

    import torch

    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found", p)
    try:
        return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user-input problem here
        blocked = _blocked_object(str(exc)) if isinstance(exc, pickle.UnpicklingError) else None
        if blocked is not None and _is_torch_file(p):
            raise InputError(f"refused to load this {what}: it holds Python objects beyond tensors and plain data, "
                             f"which could run code when read ({blocked}). Only checkpoints written by neurorefiner "
                             "(or re-saved as plain state dicts) are accepted", p) from None
        raise InputError(f"not a PyTorch {what}: {_what_is_wrong(p, exc)}", p) from None


def check_checkpoint_file(path: str | Path, what: str = "checkpoint") -> Path:
    """``path`` if it could be a checkpoint (it exists and begins as every ``torch.save`` file does), else the
    :class:`InputError` :func:`load_checkpoint` would raise. Reads four bytes: for a model built on its first use
    (the refine loop's editor), so a wrong file stops the run before any work instead of after its first round."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found", p)
    if p.is_dir() or not _is_torch_file(p):
        raise InputError(f"not a PyTorch {what}: {_what_is_wrong(p, ValueError())}", p)
    return p


#: how every file ``torch.save`` writes begins: a zip archive (since torch 1.6), or the legacy format's pickled
#: magic number
_TORCH_STARTS = (b"PK\x03\x04", b"\x80\x02\x8a\x0a")


def _is_torch_file(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) in _TORCH_STARTS


def _blocked_object(message: str) -> str | None:
    """The sentence of torch's refusal that names the Python object it blocked (``Unsupported global: GLOBAL
    posix.system was not an allowed global by default``), whole; None when the refusal names none (a damaged file,
    not a dangerous one)."""
    line = next((line for line in message.splitlines() if "GLOBAL" in line), None)
    if line is None:
        return None
    line = line.split("WeightsUnpickler error:")[-1].strip()
    return line.split(". ")[0].rstrip(".")


def _what_is_wrong(path: Path, exc: Exception) -> str:
    """Why a file that did not load is not a checkpoint, in words (torch's own text is several paragraphs about its
    defaults, cut mid-sentence it said nothing)."""
    if path.is_dir():
        return "a folder, not a file"
    if path.stat().st_size == 0:
        return "the file is empty"
    if not _is_torch_file(path):
        return "torch.save writes a zip archive (or its legacy pickle), and this file is neither"
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    first = first.split(". ")[0].rstrip(".")
    return f"the file is damaged ({type(exc).__name__}{': ' + first[:160] if first else ''})"
