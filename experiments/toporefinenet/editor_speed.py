"""The speed cost of the budget editor's additions (decoder FiLM, edit gate) at use: one edit of a 64 x 128 x 128
block (the largest the agents send) by each named checkpoint, interleaved in one process on the same block (a
tube with a cut gap, "Repair break at center-center-center"), median of 5 after a warm-up; wall and process CPU
seconds of the network pass on the whole block and of the decoded edit, and each checkpoint's ratio to the first.
Run: python experiments/toporefinenet/editor_speed.py [--threads 2] NAME=CHECKPOINT ..."""

import argparse
import os
import time

import numpy as np
import torch

from neurorefiner.inference.refiner import TopoRefiner

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
    named = dict(c.split("=", 1) for c in args.checkpoints)
    refiners = {name: TopoRefiner.load(path) for name, path in named.items()}
    image, mask = block()
    text = "Repair break at center-center-center"
    steps = {f"{name}/{what}": fn for name, r in refiners.items() for what, fn in
             (("pass", lambda r=r: r.probabilities(image, mask, text, crop=False)),
              ("decoded", lambda r=r: r.edit_result(image, mask, text)))}
    for fn in steps.values():
        fn()
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    load = os.getloadavg()[0]
    for _ in range(args.repeats):
        for key, fn in steps.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[key].append(time.perf_counter() - t)
            cpu[key].append(time.process_time() - c)
    first = next(iter(named))
    print(f"{' x '.join(map(str, SHAPE))} block, {args.threads} torch threads, median of {args.repeats}, "
          f"1-min load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| checkpoint | step | wall s | CPU s | CPU ratio to " + first + " |\n|---|---|---|---|---|")
    for key in steps:
        name, what = key.split("/")
        ref = float(np.median(cpu[f"{first}/{what}"]))
        c = float(np.median(cpu[key]))
        print(f"| {name} | {what} | {np.median(wall[key]):.2f} | {c:.2f} | {c / ref:.2f} |")


if __name__ == "__main__":
    main()
