"""TopoRefineNet speed: one 128 x 128 x 64 block forward (budget 1 s on 2 cores, CPU-size model), the
training step on CPU crops (time and samples/s), and the stage-1 defect generator's rate measured
against that training step in the same process (the generator must be at least 2x faster: ratio <= 0.5).
"""

from __future__ import annotations

import torch

from bench.core import Case

CROP = (32, 64, 64)  # CPU training crop (z, y, x), conf/refine_stage/stage1.yaml
BATCH = 2
INSTR = ["Repair break at top-left-rear", "Remove isolated noise at center-right-front"]


def _net():
    from omegaconf import OmegaConf

    from neurorefiner.models.toporefinenet import TopoRefineNet
    from neurorefiner.paths import project_root

    node = OmegaConf.load(project_root() / "conf" / "model" / "toporefinenet.yaml").net
    kw = {k: v for k, v in OmegaConf.to_container(node).items() if k not in ("_target_", "text_dim")}
    return TopoRefineNet(text_dim=384, **kw)


def _forward_setup():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    net = _net().eval()
    image = torch.rand(1, 1, 64, 128, 128)
    mask = (torch.rand(1, 1, 64, 128, 128) > 0.95).float()
    region = torch.zeros(1, 1, 64, 128, 128)
    region[..., :22, :43, :43] = 1  # one named cell of the 3 x 3 x 3 grid
    return net, image, mask, torch.randn(1, 384), region


def _forward(arg):
    net, image, mask, emb, region = arg
    with torch.inference_mode():
        net(image, mask, emb, region=region) if net.region_channel else net(image, mask, emb)


def _batch():
    g = torch.Generator().manual_seed(0)
    mask = (torch.rand(BATCH, 1, *CROP, generator=g) > 0.95).float()
    return {"image": torch.rand(BATCH, 1, *CROP, generator=g), "mask": mask, "target": mask.clone(),
            "instruction": INSTR[:BATCH], "region": torch.rand(BATCH, 1, *CROP, generator=g) > 0.5}


def _step_setup():
    from neurorefiner.models.refine_module import TopoRefineModule
    from neurorefiner.models.text_encoders import HashingEncoder

    torch.set_num_threads(2)
    torch.manual_seed(0)
    module = TopoRefineModule(_net(), HashingEncoder(dim=384), swap_instruction_prob=0.25)
    module.log = lambda *a, **k: None  # no trainer attached
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    return module, opt, _batch()


def _step(arg):
    module, opt, batch = arg
    opt.zero_grad()
    module.training_step(batch, 0).backward()
    opt.step()


def _gen_setup():
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from neurorefiner.data.datamodules.stage1 import DefectSampleDataset
    from neurorefiner.paths import project_root

    with initialize_config_dir(config_dir=str(project_root() / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["+stage=1"])
    dm = instantiate(cfg.stages["1"].datamodule, crop_size=list(CROP))
    dm.setup()
    ds = DefectSampleDataset(dm.train_volumes, tuple(CROP), 10_000, dm.defects, seed=123)
    state = {"ds": ds, "i": 0}
    return state, _step_setup()


def _generate(arg):
    state, _ = arg
    for _ in range(BATCH):
        state["ds"][state["i"]]
        state["i"] += 1


def _step_for_reference(arg):
    _step(arg[1])


CASES = [
    Case("toporefinenet/forward_128x128x64", _forward_setup, _forward, repeats=3, budget_s=1.0,
         notes="CPU-size model, 2 threads, batch 1, z=64, y=x=128"),
    Case("toporefinenet/train_step_b2_32x64x64", _step_setup, _step, repeats=3,
         extra=lambda arg, t: {"samples_per_s": BATCH / t}),
    Case("toporefinenet/defect_generator_vs_step", _gen_setup, _generate, reference=_step_for_reference,
         reference_name="training step (same batch size)", repeats=5,
         extra=lambda arg, t: {"gen_samples_per_s": BATCH / t},
         notes="ratio = generator time / step time; <= 0.5 means the generator is >= 2x the model's rate"),
]
