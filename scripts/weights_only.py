"""Copy a Lightning checkpoint without its optimiser and loop state, so a resume point's weights at one step can
be kept (and named by an ``init_from`` or a probe) while the run goes on writing ``last.ckpt``.

``python scripts/weights_only.py SRC.ckpt DST.ckpt`` -> DST holds ``state_dict``, ``hyper_parameters`` (what the
editor and ``init_from`` read), ``global_step`` and ``epoch``; the step is printed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

KEPT = ("state_dict", "hyper_parameters", "global_step", "epoch", "pytorch-lightning_version")


def weights_only(src: Path, dst: Path) -> int:
    """Write ``dst`` (atomically) from ``src``; returns the step it holds."""
    from neurorefiner.errors import InputError
    from neurorefiner.io.atomic import atomic_path
    from neurorefiner.io.checkpoints import load_checkpoint

    try:
        ckpt = load_checkpoint(src, "Lightning checkpoint")  # plain data only: nothing in the file runs
    except InputError as err:
        raise SystemExit(f"error: {err}") from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise SystemExit(f"error: {src}: not a Lightning checkpoint (no state_dict)")
    with atomic_path(dst) as tmp:
        torch.save({k: ckpt[k] for k in KEPT if k in ckpt}, tmp)
    return int(ckpt.get("global_step", -1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    args = parser.parse_args()
    print(f"{args.dst}: step {weights_only(args.src, args.dst)}")


if __name__ == "__main__":
    main()
