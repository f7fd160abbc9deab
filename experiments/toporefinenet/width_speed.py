"""CPU seconds of one TopoRefineNet training step (forward + backward + AdamW, batch 2, 32 x 64 x 64 crops, one
torch thread) at the shipped width and twice it: the speed cost of widening.
Run: OMP_NUM_THREADS=1 python experiments/toporefinenet/width_speed.py"""

import time

import torch

from neurorefiner.models.toporefinenet import TopoRefineNet

torch.set_num_threads(1)
for channels in ((8, 16, 32, 64), (16, 32, 64, 128)):
    torch.manual_seed(0)
    net = TopoRefineNet(channels=channels, text_dim=384, region_channel=True)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    x = torch.rand(2, 1, 32, 64, 64)
    m = (torch.rand(2, 1, 32, 64, 64) > 0.9).float()
    r = torch.ones(2, 1, 32, 64, 64)
    t = torch.randn(2, 384)
    times = []
    for i in range(6):
        c = time.process_time()
        loss = net(x, m, t, region=r).logsumexp(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i:  # the first step warms up
            times.append(time.process_time() - c)
    n = sum(p.numel() for p in net.parameters())
    median = sorted(times)[len(times) // 2]
    print(f"channels {list(channels)}: {n} parameters, {median:.2f} CPU s per step (median of 5)")
