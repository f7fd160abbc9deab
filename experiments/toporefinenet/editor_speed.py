"""The speed cost of the budget editor's additions (decoder FiLM, edit gate) at use: one edit of a 64 x 128 x 128
block (the largest the agents send) by each named checkpoint, interleaved in one process on the same block (a
tube with a cut gap, "Repair break at center-center-center"), timed by the editor probe's ``time_edit`` in rounds
alternating between checkpoints, median of 5; wall and process CPU seconds of the network pass on the whole block
and of the decoded edit, and each checkpoint's ratio to the first.
Run: python experiments/toporefinenet/editor_speed.py [--threads 2] NAME=CHECKPOINT ..."""

import argparse
import os

import numpy as np
import torch

from neurorefiner.inference.refiner import TopoRefiner
from neurorefiner.studies.editor_probe import time_edit

SHAPE = (64, 128, 128)


def block() -> tuple[np.ndarray, np.ndarray]:
    """A bright tube along x with a 6-voxel gap cut from its mask in the middle, on a dim noisy background."""
    rng = np.random.default_rng(0)
    image = rng.normal(0.1, 0.03, SHAPE).astype(np.float32)
    zz, yy = np.ogrid[: SHAPE[0], : SHAPE[1]]
    tube = ((zz - 32) ** 2 + (yy - 64) ** 2 <= 9)[:, :, None] & np.ones(SHAPE[2], bool)[None, None, :]
    image[tube] = 0.8
    mask = tube.copy()
    mask[:, :, 61:67] = False
    return image, mask.astype(np.uint8)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", help="NAME=CHECKPOINT; the first is the reference")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    refiners = {name: TopoRefiner.load(path) for name, path in (c.split("=", 1) for c in args.checkpoints)}
    image, mask = block()
    text = "Repair break at center-center-center"
    load = os.getloadavg()[0]
    # one timed edit per checkpoint per round (time_edit warms up and times the pass and the decoded edit), rounds
    # alternating between checkpoints so a change of load on the shared machine hits them alike
    rounds = [{name: time_edit(r, image, mask, text, repeats=1) for name, r in refiners.items()}
              for _ in range(args.repeats)]
    first = next(iter(refiners))
    print(f"{' x '.join(map(str, SHAPE))} block, {args.threads} torch threads, median of {args.repeats}, "
          f"1-min load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| checkpoint | step | wall s | CPU s | CPU ratio to " + first + " |\n|---|---|---|---|---|")
    for name in refiners:
        for what, key in (("pass", "raw"), ("decoded", "decoded")):
            wall = float(np.median([r[name][f"{key}_s"] for r in rounds]))
            cpu = float(np.median([r[name][f"{key}_cpu_s"] for r in rounds]))
            ref = float(np.median([r[first][f"{key}_cpu_s"] for r in rounds]))
            print(f"| {name} | {what} | {wall:.2f} | {cpu:.2f} | {cpu / ref:.2f} |")


if __name__ == "__main__":
    main()
