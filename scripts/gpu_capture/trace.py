"""A real PyTorch profiler (Kineto) trace of a small training loop on one GPU whose DataLoader is slow
(each sample sleeps), with gradients all-reduced through NCCL (world size 1), as DDP would."""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

class SlowSamples(torch.utils.data.Dataset):
    def __len__(self): return 10_000
    def __getitem__(self, i):
        time.sleep(0.002)  # decoding/augmentation on the CPU
        return torch.randn(1024), torch.randint(0, 10, ()).item()

os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096), torch.nn.GELU(),
                              torch.nn.Linear(4096, 10)]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = torch.utils.data.DataLoader(SlowSamples(), batch_size=32, num_workers=0)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=3),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for step, (xb, yb) in enumerate(loader):
        xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step(); opt.zero_grad(set_to_none=True)
        prof.step()
        if step >= 5:
            break
torch.cuda.synchronize()
dist.destroy_process_group()
print("trace written", sys.argv[1])
