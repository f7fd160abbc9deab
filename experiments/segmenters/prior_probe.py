"""How fast a segmenter starts to separate neurite from background, with and without the foreground-prior
initialisation of its output layer (tenth round of issue 5; SYNTHETIC data).

Trains each (network, prior) for a few dozen steps with the shipped synthetic recipe (32x96x96 crops, batch 2,
AdamW 2e-3 with 20 warm-up steps, Dice + CE, the same seed and crops for every run) and prints, every 16 steps,
the mean foreground probability on the batch's neurite voxels and on its background voxels. No validation, no
checkpoint: it shows the first stretch of training, where GBP-Net-style lost its 256-step budget on
synthetic_cwmbs_weak and synthetic_zbfwb. Writes prior_probe_<dataset>.md/.csv beside this file.

    python experiments/segmenters/prior_probe.py --dataset synthetic_cwmbs_weak --steps 96 \\
        --run gbpnet_style --run gbpnet_style:0.01 --run unet3d --run unet3d:0.01
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def probe(arch: str, prior: float | None, dataset: str, steps: int, every: int) -> list[dict]:
    import torch
    from hydra import compose, initialize_config_dir

    from neurorefiner.training.segmenter import build_datamodule, build_module, training_spacing

    overrides = ["task=segment", f"model={arch}", f"dataset={dataset}", "segmentation.data.num_workers=0"]
    if prior is not None:
        overrides.append(f"segmentation.module.foreground_prior={prior}")
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    torch.manual_seed(0)
    dm = build_datamodule(cfg)
    dm.setup("fit")
    module = build_module(cfg, training_spacing(dm))
    net, seg = module.net, cfg.segmentation.module
    opt = torch.optim.AdamW(net.parameters(), lr=seg.lr, weight_decay=seg.weight_decay)
    torch.manual_seed(1)  # the same crops for every run, whatever the network's initialisation drew
    batches = iter(())
    out, started = [], time.perf_counter()
    for step in range(steps):
        batch = next(batches, None)
        if batch is None:
            batches = iter(dm.train_dataloader())
            batch = next(batches)
        for group in opt.param_groups:  # the module's warm-up (the cosine decay is negligible this early)
            group["lr"] = seg.lr * min(1.0, (step + 1) / (seg.warmup_steps + 1))
        logits = net(batch["image"])
        loss = module.loss(logits, batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps - 1:
            with torch.no_grad():
                p = logits.softmax(1)[:, 1]
                fg = batch["label"][:, 0] > 0
            out.append({"network": arch, "prior": "" if prior is None else prior, "step": step,
                        "loss": loss.item(), "p_neurite": float(p[fg].mean()) if fg.any() else float("nan"),
                        "p_background": float(p[~fg].mean()), "seconds": time.perf_counter() - started})
            r = out[-1]
            print(f"{arch} prior {r['prior'] or '-'} step {step}: loss {r['loss']:.3f}, p(neurite) "
                  f"{r['p_neurite']:.3f}, p(background) {r['p_background']:.3f}", flush=True)
    return out


def main() -> None:
    import torch

    from neurorefiner.io.atomic import atomic_path, write_text_atomic

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="synthetic_cwmbs_weak")
    p.add_argument("--steps", type=int, default=96)
    p.add_argument("--every", type=int, default=16)
    p.add_argument("--run", action="append", required=True, help="NETWORK or NETWORK:PRIOR (repeat)")
    a = p.parse_args()
    os.environ.setdefault("PROJECT_ROOT", str(ROOT))
    torch.set_num_threads(1)
    rows: list[dict] = []
    for spec in a.run:
        arch, _, prior = spec.partition(":")
        rows += probe(arch, float(prior) if prior else None, a.dataset, a.steps, a.every)
    stem = HERE / f"prior_probe_{a.dataset}"
    with atomic_path(stem.with_suffix(".csv")) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    runs = " ".join(f"--run {r}" for r in a.run)
    lines = [f"# First {a.steps} training steps with and without the foreground prior ({a.dataset}, SYNTHETIC)", "",
             "Mean foreground probability the network gives the batch's neurite voxels and its background voxels "
             "(training crops, before the step's update); the gap between them is what validation Dice needs. "
             "Same seed and crops for every run, one torch thread.", "",
             f"Command: `python experiments/segmenters/prior_probe.py --dataset {a.dataset} --steps {a.steps} "
             f"{runs}`", "",
             "| network | prior | step | loss | p(neurite) | p(background) | gap |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['network']} | {r['prior'] or 'none'} | {r['step']} | {r['loss']:.3f} | "
              + (f"{r['p_neurite']:.3f}" if r["p_neurite"] == r["p_neurite"] else "- (no neurite in the batch)")
              + f" | {r['p_background']:.3f} | "
              + (f"{r['p_neurite'] - r['p_background']:.3f}" if r["p_neurite"] == r["p_neurite"] else "-") + " |"
              for r in rows]
    write_text_atomic(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    print(f"wrote {stem.with_suffix('.md')}")


if __name__ == "__main__":
    main()
