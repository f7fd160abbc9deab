"""What the editor's size and additions cost in CPU time.

- :func:`editor_speed` (``neurorefiner study editor-speed NAME=CHECKPOINT ...``): one edit of a 64 x 128 x 128
  block (the largest the agents send) by each named checkpoint, interleaved in one process on the same block (a
  tube with a cut gap, "Repair break at center-center-center"), timed by the editor probe's ``time_edit`` in
  rounds alternating between checkpoints, median of ``repeats``; wall and process CPU seconds of the network pass
  on the whole block and of the decoded edit, and each checkpoint's ratio to the first. The speed cost of the
  budget editor's additions (decoder FiLM, edit gate) at use.
- :func:`width_speed` (``neurorefiner study width-speed``): CPU seconds of one TopoRefineNet training step
  (forward + backward + AdamW, batch 2, 32 x 64 x 64 crops) at the shipped width and twice it, one torch thread:
  the speed cost of widening.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

SHAPE = (64, 128, 128)
WIDTHS = ((8, 16, 32, 64), (16, 32, 64, 128))


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


def editor_speed(checkpoints: Mapping[str, str | Path], threads: int = 2, repeats: int = 5) -> str:
    """The speed table of the named checkpoints (name -> checkpoint; the first is the reference): a line naming
    the block, threads, repeats and the machine's load before and after, then the Markdown table."""
    import torch

    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.studies.editor_probe import time_edit

    torch.set_num_threads(threads)
    refiners = {name: TopoRefiner.load(path) for name, path in checkpoints.items()}
    image, mask = block()
    text = "Repair break at center-center-center"
    load = os.getloadavg()[0]
    # one timed edit per checkpoint per round (time_edit warms up and times the pass and the decoded edit), rounds
    # alternating between checkpoints so a change of load on the shared machine hits them alike
    rounds = [{name: time_edit(r, image, mask, text, repeats=1) for name, r in refiners.items()}
              for _ in range(repeats)]
    first = next(iter(refiners))
    lines = [f"{' x '.join(map(str, SHAPE))} block, {threads} torch threads, median of {repeats}, "
             f"1-min load {load:.1f} -> {os.getloadavg()[0]:.1f}",
             f"| checkpoint | step | wall s | CPU s | CPU ratio to {first} |", "|---|---|---|---|---|"]
    for name in refiners:
        for what, key in (("pass", "raw"), ("decoded", "decoded")):
            wall = float(np.median([r[name][f"{key}_s"] for r in rounds]))
            cpu = float(np.median([r[name][f"{key}_cpu_s"] for r in rounds]))
            ref = float(np.median([r[first][f"{key}_cpu_s"] for r in rounds]))
            lines.append(f"| {name} | {what} | {wall:.2f} | {cpu:.2f} | {cpu / ref:.2f} |")
    return "\n".join(lines) + "\n"


def write_editor_speed(checkpoints: Mapping[str, str | Path], out: Path, title: str, command: str,
                       threads: int = 2, repeats: int = 5) -> str:
    """:func:`editor_speed` as a Markdown file with its title and stamp (date, commit, command); returns the text."""
    from neurorefiner.evaluation.tables import provenance, write_markdown

    stamp = provenance(command)
    table = editor_speed(checkpoints, threads, repeats)
    text = (f"# {title}\n\nMade {stamp['date']} at commit {stamp['commit']} by `{stamp['command']}` "
            f"({threads} torch threads).\n\n{table}")
    write_markdown(out, text)
    return text


def width_speed(widths: Sequence[Sequence[int]] = WIDTHS, steps: int = 5) -> list[str]:
    """One line per channel width: parameters and the median CPU seconds of a training step (after a warm-up
    step), one torch thread."""
    import torch

    from neurorefiner.models.toporefinenet import TopoRefineNet

    torch.set_num_threads(1)
    lines = []
    for channels in widths:
        torch.manual_seed(0)
        net = TopoRefineNet(channels=tuple(channels), text_dim=384, region_channel=True)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
        x = torch.rand(2, 1, 32, 64, 64)
        m = (torch.rand(2, 1, 32, 64, 64) > 0.9).float()
        r = torch.ones(2, 1, 32, 64, 64)
        t = torch.randn(2, 384)
        times = []
        for i in range(steps + 1):
            c = time.process_time()
            loss = net(x, m, t, region=r).logsumexp(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i:  # the first step warms up
                times.append(time.process_time() - c)
        n = sum(p.numel() for p in net.parameters())
        median = sorted(times)[len(times) // 2]
        lines.append(f"channels {list(channels)}: {n} parameters, {median:.2f} CPU s per step (median of {steps})")
    return lines
