"""PyTorch profiler (Kineto) Chrome-trace JSON, one file per rank -> step-time breakdown.

Step windows are the CPU-side "ProfilerStep#N" spans. Within them: comm_time_frac = share covered by GPU
kernels whose name contains "nccl" and by no other kernel (exposed communication: NCCL time hidden under compute
on another stream does not lengthen the step), gpu_idle_frac = share with no GPU kernel at all,
dataloader_wait_frac = share covered by "enumerate(DataLoader)..." / "DataLoader..." spans. Entity "rank<N>",
rank from distributedInfo.rank or the file name (rank-3, rank_3, rank3). The context keeps the GPU time per step
of the 40 busiest kernels, which a trace of the good state is compared with (op_slowdown_spread).
"""
import json
import os
import re

from .common import Artifact, fail, mean

_STEP = re.compile(r"^ProfilerStep#\d+$")
_LOADER = re.compile(r"^(enumerate\(DataLoader\)|DataLoader)", re.I)


def detect(text: str) -> bool:
    head = text[:4000].lstrip()
    return head.startswith("{") and '"traceEvents"' in text[:200000]


def _kernel_time(kernels, steps: int, top: int = 40) -> dict:
    """GPU time per step of the busiest kernels, by name (for a before/after comparison of two traces)."""
    total = {}
    for e in kernels:
        name = str(e.get("name", ""))[:120]
        total[name] = total.get(name, 0.0) + float(e["dur"])
    busiest = sorted(total.items(), key=lambda kv: -kv[1])[:top]
    return {name: round(us / steps, 3) for name, us in busiest}


def _union(spans):
    """Merge (start, end) intervals."""
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _intersect(a, b):
    """Intervals covered by both union(a) and union(b)."""
    out, a, b = [], _union(a), _union(b)
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _covered(spans, windows):
    """Length of union(spans) inside union(windows)."""
    total, spans = 0.0, _union(spans)
    for ws, we in windows:
        for s, e in spans:
            total += max(0.0, min(e, we) - max(s, ws))
    return total


def parse(text: str, where: str) -> Artifact:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        fail(where, e.lineno, "json", f"not valid JSON ({e.msg}): file truncated?")
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        fail(where, 1, "traceEvents", "no traceEvents list: not a PyTorch profiler trace")
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and "ts" in e]
    # the CPU-side spans; newer PyTorch also writes a short gpu_user_annotation copy of each on the GPU row
    steps = [e for e in spans if _STEP.match(str(e.get("name", ""))) and e.get("cat") != "gpu_user_annotation"]
    if not steps:
        fail(where, 1, "ProfilerStep", "no ProfilerStep#N spans: profile with torch.profiler.schedule and prof.step()")
    iv = lambda e: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
    windows = _union(iv(e) for e in steps)
    wall = sum(e - s for s, e in windows)
    kernels = [e for e in spans if str(e.get("cat", "")).lower() == "kernel"]
    nccl = [iv(e) for e in kernels if "nccl" in str(e.get("name", "")).lower()]
    compute = [iv(e) for e in kernels if "nccl" not in str(e.get("name", "")).lower()]
    nccl_time, hidden = _covered(nccl, windows), _covered(_intersect(nccl, compute), windows)
    loader = [iv(e) for e in spans if _LOADER.match(str(e.get("name", ""))) and e not in steps]
    dist = data.get("distributedInfo") or {}
    rank = dist.get("rank")
    if rank is None and (m := re.search(r"rank[-_]?(\d+)", os.path.basename(where))):
        rank = int(m.group(1))
    notes = []
    if rank is None:
        notes.append("rank not in distributedInfo or the file name: assumed rank0")
        rank = 0
    ent = f"rank{rank}"
    signals = {
        "step_time_s": {ent: mean(e["dur"] for e in steps) / 1e6},
        "comm_time_frac": {ent: (nccl_time - hidden) / wall},
        "gpu_idle_frac": {ent: 1 - _covered([iv(e) for e in kernels], windows) / wall},
        "dataloader_wait_frac": {ent: _covered(loader, windows) / wall},
    }
    if not kernels:
        notes.append("no GPU kernel events (CPU-only trace or CUDA activities not recorded): gpu_idle_frac is 1")
    devices = {e.get("args", {}).get("device", e.get("pid")) for e in kernels}
    if len(devices) > 1:
        notes.append(f"kernels from {len(devices)} devices in one trace; their union is used")
    notes.append(f"{len(steps)} ProfilerStep spans; GPU time is counted inside the CPU-side step windows, "
                 "so kernels that run after their step's CPU span are credited to the next step")
    if not nccl and any(str(e.get("name", "")).startswith("nccl:") for e in spans):
        notes.append("nccl:* calls on the CPU but no NCCL kernels on the GPU (world size 1, or the collectives ran "
                     "outside the recorded steps): comm_time_frac is 0")
    if nccl:
        notes.append(f"NCCL kernels cover {nccl_time / wall:.0%} of the step, {hidden / nccl_time:.0%} of that hidden "
                     "under compute kernels: comm_time_frac counts only the exposed rest")
    ctx = {"rank": rank, "steps": len(steps), "kernel_us_per_step": _kernel_time(kernels, len(steps))}
    for key in ("world_size", "backend", "nccl_version"):
        if key in dist:
            ctx[key] = dist[key]
    props = data.get("deviceProperties") or []
    if props and isinstance(props[0], dict) and props[0].get("name"):
        ctx["gpu"] = props[0]["name"]
    return Artifact("kineto", signals, ctx, notes)
