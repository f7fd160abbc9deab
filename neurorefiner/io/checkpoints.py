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
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"refused to load this {what}: it holds Python objects beyond tensors and plain data, "
                         f"which could run code when read ({first[:200]}). Only checkpoints written by "
                         "neurorefiner (or re-saved as plain state dicts) are accepted", p) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is a user-input problem here
        raise InputError(f"not a readable PyTorch {what} ({type(exc).__name__}: {str(exc)[:200]})", p) from None
