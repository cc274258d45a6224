"""GPU load phases for the dmon capture: idle, HBM copy, bf16 GEMM, batch-1 GEMV (decode-like). Prints phase times."""
import subprocess
import sys
import time

import torch

def run(name, fn, seconds, snapshot=None):
    """Run fn for seconds; halfway, write `nvidia-smi -q` (perf, clocks, power) to snapshot if given."""
    torch.cuda.synchronize()
    t0 = time.time()
    print(f"{name} start {time.strftime('%H:%M:%S', time.localtime(t0))}", flush=True)
    n = 0
    while time.time() - t0 < seconds:
        fn(); n += 1
        if snapshot and time.time() - t0 > seconds / 2:
            with open(snapshot, "w") as f:
                subprocess.run(["nvidia-smi", "-q", "-d", "PERFORMANCE,CLOCK,POWER,TEMPERATURE,UTILIZATION"], stdout=f)
            snapshot = None
        if n % 20 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"{name} end {time.strftime('%H:%M:%S')} iterations {n}", flush=True)

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 8
src = torch.empty(2 << 30, dtype=torch.uint8, device="cuda"); dst = torch.empty_like(src)
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda"); b = torch.randn_like(a)
w = torch.randn(16384, 16384, dtype=torch.bfloat16, device="cuda"); x = torch.randn(1, 16384, dtype=torch.bfloat16, device="cuda")
time.sleep(3)
run("hbm_copy", lambda: dst.copy_(src), secs)
time.sleep(2)
run("bf16_gemm_8192", lambda: a @ b, secs, sys.argv[2] if len(sys.argv) > 2 else None)
time.sleep(2)
run("gemv_batch1_16384", lambda: x @ w, secs)
time.sleep(3)
