"""Stage-1 defect generation speed (the generator must not be the bottleneck, >= 2x the model's
training rate). Generation is timed through the real data path (Dataset items + collate, as the
DataLoader does it) for one batch; the reference is one training step of the CPU TopoRefineNet (the
default ``conf/model/toporefinenet.yaml`` and text encoder) on a batch of the same size, measured in the
same process. ratio = generation time / training time for the same samples: <= 0.5 means >= 2x."""

from __future__ import annotations

import os

from bench.core import Case

BATCH = 2
CROP = (32, 64, 64)  # (D, H, W): the CPU stage-1 crop (conf/refine_stage/stage1.yaml)


def _datamodule():
    from neurorefiner.data.datamodules.stage1 import Stage1DefectDataModule

    dm = Stage1DefectDataModule("diadem", crop_size=CROP, batch_size=BATCH, samples_per_epoch=BATCH,
                                val_samples=0)
    dm.setup()
    return dm


def _setup_generator():
    import torch

    torch.set_num_threads(1)  # the DataLoader worker's setting (the trainer owns the other core)
    return {"dm": _datamodule()}


def _generate(arg):
    for _ in arg["dm"].train_dataloader():
        pass


def _setup_with_model():
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from neurorefiner.paths import conf_dir, project_root

    os.environ.setdefault("PROJECT_ROOT", str(project_root()))
    arg = _setup_generator()
    torch.set_num_threads(2)
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=["+stage=1"])
    text_encoder = instantiate(cfg.text_encoder)
    module = instantiate(cfg.model, text_encoder=text_encoder, _convert_="partial")
    batch = next(iter(arg["dm"].train_dataloader()))
    arg.update(module=module, batch=batch, opt=torch.optim.AdamW(module.net.parameters(), lr=1e-3))
    return arg


def _generate_one_thread(arg):
    import torch

    torch.set_num_threads(1)
    _generate(arg)
    torch.set_num_threads(2)


def _train_step(arg):
    m, b, opt = arg["module"], arg["batch"], arg["opt"]
    m.train()
    opt.zero_grad()
    loss = m._loss(m(b["image"], b["mask"], list(b["instruction"]), b["region"]), b["target"], b["mask"])
    loss.backward()
    opt.step()


def _rate(arg, t):
    return {"samples_per_s": BATCH / t}


CASES = [
    Case("defects/stage1_batch_diadem_32x64x64", _setup_generator, _generate, repeats=10,
         budget_s=0.25, extra=_rate,
         notes="crop + defect + instruction + tensors for one batch of 2, DIADEM dev gold masks"),
    Case("defects/stage1_batch_vs_train_step", _setup_with_model, _generate_one_thread,
         reference=_train_step, reference_name="TopoRefineNet CPU train step (batch 2)", repeats=5,
         extra=_rate),
]
