"""Seconds per training step of every baseline network at the DIADEM recipe's crop, alone on one torch thread:
batch 2, forward + backward + AdamW step on random input (the median of 3 steps after one warm-up step).

    .venv/bin/python experiments/segmenters/step_times.py    # writes step_times.md beside this file

The training wall times in the round-3 cards were measured with several jobs sharing two cores; these are the
per-network costs without that load. UNETR/SwinUNETR use 32x128x128 (their ViT/Swin need multiples of 16/32).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

ROOT = Path(__file__).resolve().parents[2]
ARCHS = ("unet3d", "vnet", "nnunet_style", "sgsnet_style", "gbpnet_style", "adtlnet_style", "unetr", "swinunetr")


def step_seconds(net: torch.nn.Module, patch: list[int], steps: int = 3) -> float:
    opt = torch.optim.AdamW(net.parameters(), 1e-3)
    x = torch.randn(2, 1, *patch)
    times = []
    for i in range(steps + 1):
        t = time.perf_counter()
        out = net(x)
        out = out[0] if isinstance(out, (tuple, list)) else out
        out = out[next(iter(out))] if isinstance(out, dict) else out
        out.float().mean().backward()
        opt.step()
        opt.zero_grad()
        if i:  # the first step warms up allocators and kernels
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lines = ["# Training step time per network (one torch thread, batch 2, median of 3 steps)", "",
             "Command: `.venv/bin/python experiments/segmenters/step_times.py`", "",
             "| network | crop (z, y, x) | parameters | seconds / step |", "|---|---|---|---|"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        for arch in ARCHS:
            patch = [32, 128, 128] if arch in ("unetr", "swinunetr") else [24, 128, 128]
            cfg = compose("train", overrides=["task=segment", "experiment=segment_diadem_cpu", f"model={arch}",
                                              f"segmentation.data.patch_size={patch}"])
            net = instantiate(cfg.model)
            s = step_seconds(net, patch)
            lines.append(f"| {arch} | {'x'.join(map(str, patch))} | {sum(p.numel() for p in net.parameters()):,} "
                         f"| {s:.2f} |")
            print(lines[-1], flush=True)
    (Path(__file__).resolve().parent / "step_times.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
