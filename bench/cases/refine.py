"""A full refine with the heuristic agents, and one with the learned agents (the shipped judge), each as
``refine.py`` builds it from ``conf/agent/`` and ``conf/editor/toporefinenet.yaml`` (targets: a 256^3 volume
under 60 s on 2 cores, at most 1.5x one sliding-window pass of the shipped 3D U-Net over the same volume,
heuristic agents under 10 % of the run). The volume is a SYNTHETIC synthetic_cwmbs_weak stack; its mask is the
gold label with breaks cut into it and specks added (:func:`neurorefiner.defects.damage.cut_and_speckle`), so
the loop has real work. The reference, measured in the same process, is the shipped U-Net's sliding-window pass
over the same image."""

from __future__ import annotations

import numpy as np

from bench.core import SMOKE, Case, sized

SHAPE = sized((256, 256, 256), (32, 64, 64))
BREAKS, SPECKS = (1, 2) if SMOKE else (6, 12)


def _setup(backend: str = "heuristic"):
    import torch
    from omegaconf import OmegaConf

    from neurorefiner.defects.damage import cut_and_speckle
    from neurorefiner.inference.segmenter import load_segmenter
    from neurorefiner.paths import conf_dir, project_root
    from neurorefiner.refine.run import RefineRun, editor_factory
    from neurorefiner.synth import render_volume
    from neurorefiner.synth.presets import preset_params

    torch.set_num_threads(2)
    image, label, _, spacing = render_volume(preset_params("synthetic_cwmbs_weak").replace(shape=SHAPE), 0)
    mask = cut_and_speckle(label, np.random.default_rng(0), BREAKS, SPECKS)
    norm = image.astype(np.float32) / max(float(image.max()), 1.0)
    editor_cfg = OmegaConf.load(conf_dir() / "editor" / "toporefinenet.yaml")
    # the run refine.py builds from conf/agent/<backend>.yaml and the shipped editor node, the editor loaded here
    # (outside the timing, as the U-Net is)
    run = RefineRun.build(OmegaConf.load(conf_dir() / "agent" / f"{backend}.yaml"), None, editor_cfg,
                          editor_object=editor_factory(editor_cfg)()).with_spacing(spacing, "the preset's voxel size")
    return {"image": norm, "mask": mask, "run": run, "seconds": {},
            "unet": load_segmenter(project_root() / "checkpoints" / "segmenters" / "unet3d_diadem_cpu.pt"),
            "spacing": spacing}


def _refine(arg) -> None:
    result = arg["run"].run(arg["image"], arg["mask"])
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
