"""A full refine with the heuristic agents, and one with the learned agents (the shipped judge), and the shipped
editor (targets: a 256^3 volume under 60 s on 2 cores,
at most 1.5x one sliding-window pass of the shipped 3D U-Net over the same volume, heuristic agents under 10 %
of the run). The volume is a SYNTHETIC synthetic_cwmbs_weak stack; its mask is the gold label with breaks cut
into it and specks added, so the loop has real work. The reference, measured in the same process, is the
shipped U-Net's sliding-window pass over the same image."""

from __future__ import annotations

import numpy as np

from bench.core import SMOKE, Case, sized

SHAPE = sized((256, 256, 256), (32, 64, 64))
BREAKS, SPECKS = (1, 2) if SMOKE else (6, 12)


def _setup(backend: str = "heuristic"):
    import torch

    from neurorefiner.agents import heuristic
    from neurorefiner.agents.editor import load_topo_refiner
    from neurorefiner.agents.loop import Agents, LoopSettings
    from neurorefiner.inference.segmenter import load_segmenter
    from neurorefiner.paths import project_root
    from neurorefiner.synth import render_volume
    from neurorefiner.synth.presets import preset_params

    torch.set_num_threads(2)
    image, label, _, spacing = render_volume(preset_params("synthetic_cwmbs_weak").replace(shape=SHAPE), 0)
    rng = np.random.default_rng(0)
    mask = label.copy()
    fg = np.argwhere(label)
    for z, y, x in fg[rng.choice(len(fg), size=min(BREAKS, len(fg)), replace=False)]:
        mask[max(z - 2, 0):z + 3, max(y - 4, 0):y + 5, max(x - 4, 0):x + 5] = False
    for _ in range(SPECKS):
        z, y, x = (int(rng.integers(2, s - 3)) for s in SHAPE)
        mask[z - 1:z + 2, y - 1:y + 2, x - 1:x + 2] = True
    norm = image.astype(np.float32) / max(float(image.max()), 1.0)
    if backend == "learned":
        from neurorefiner.agents import learned

        agents = Agents(learned.LearnedInspector(), learned.LearnedAdvisor(),
                        learned.LearnedValidator(connect_margin=10))
    else:
        agents = Agents(heuristic.HeuristicInspector(), heuristic.HeuristicAdvisor(), heuristic.HeuristicValidator())
    return {"image": norm, "mask": mask, "spacing": spacing, "agents": agents, "editor": load_topo_refiner(),
            "settings": LoopSettings(), "unet": load_segmenter(project_root() / "checkpoints" / "segmenters" /
                                                               "unet3d_diadem_cpu.pt"), "seconds": {}}


def _refine(arg) -> None:
    from neurorefiner.agents.loop import run_loop

    result = run_loop(arg["image"], arg["mask"], arg["agents"], arg["editor"], arg["settings"], arg["spacing"])
    arg["seconds"] = dict(result.seconds)


def _unet_pass(arg) -> None:
    from neurorefiner.inference.segmenter import segment_array

    segment_array(arg["unet"], arg["image"], spacing=arg["spacing"])


def _shares(arg, t: float) -> dict:
    s = arg["seconds"]
    out = {f"share_{role}": float(s.get(role, 0.0)) / t for role in ("inspector", "advisor", "editor", "validator")}
    out["share_agents"] = out["share_inspector"] + out["share_advisor"] + out["share_validator"]
    return out


CASES = [
    Case("refine/heuristic_agents_256^3", _setup, _refine, reference=_unet_pass,
         reference_name="shipped 3D U-Net sliding-window pass, same volume", repeats=1, budget_s=60.0, extra=_shares,
         notes="SYNTHETIC synthetic_cwmbs_weak stack, gold label with 6 breaks and 12 specks; 2 torch threads"),
    Case("refine/learned_agents_256^3", lambda: _setup("learned"), _refine, reference=_unet_pass,
         reference_name="shipped 3D U-Net sliding-window pass, same volume", repeats=1, budget_s=60.0, extra=_shares,
         notes="as above, agent=learned (every candidate scored by checkpoints/judge.json); 2 torch threads"),
]
