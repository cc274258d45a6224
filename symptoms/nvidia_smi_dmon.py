"""`nvidia-smi dmon` (default columns or -s ... -o DT, with or without --gpm-metrics) -> per-GPU averages.

GPM columns (Hopper and later, `--gpm-metrics 2,5,10`) are the profiling counters DCGM exports as
DCGM_FI_PROF_*: smutil = SM activity, mmaact = tensor-pipe activity, dram = DRAM bandwidth use. They are
computed over the interval before each sample, so they lag the instantaneous columns by one row; '-' (no
interval yet) is skipped. pviol is the share of the interval spent power-capped.
"""
import re

from .common import Artifact, fail, mean

# dmon column -> (signal id, scale)
_COLS = {"sm": ("gpu_util", 0.01), "pclk": ("sm_clock_mhz", 1.0), "pwr": ("power_w", 1.0), "gtemp": ("temp_c", 1.0),
         "smutil": ("sm_active", 0.01), "mmaact": ("tensor_active", 0.01), "dram": ("dram_active", 0.01)}
_BASIC = ["sm", "pclk", "pwr", "gtemp"]   # the columns a missing-column note is about
POWER_CAPPED_SHARE = 0.1   # mean pviol at or above this: the GPU spent a tenth of the capture power-capped
_HEADER = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\b", re.I)


def detect(text: str) -> bool:
    lines = text.splitlines()[:20]
    return any(_HEADER.match(l.strip()) for l in lines) and any(l.strip().startswith("#") and "Idx" in l for l in lines)


def parse(text: str, where: str) -> Artifact:
    """Average each GPU's sm/pclk/pwr/gtemp over all samples; skip prompt, blank and header lines."""
    cols, samples, n = None, {}, 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or "nvidia-smi" in line or line.startswith("$"):
            continue
        if line.startswith("#"):
            if _HEADER.match(line):
                cols = line.lstrip("#").split()
            continue
        if cols is None:
            fail(where, n, "header", "data before the '# gpu ...' header line: not nvidia-smi dmon output?")
        vals = line.split()
        if len(vals) != len(cols):
            fail(where, n, "row", f"{len(vals)} fields, header has {len(cols)}: line cut off or not dmon output")
        row = dict(zip(cols, vals))
        if not row["gpu"].isdigit():
            fail(where, n, "gpu", f"GPU index {row['gpu']!r} is not a number")
        samples.setdefault(f"gpu{row['gpu']}", []).append(row)
    if not samples:
        fail(where, n or 1, "samples", "no dmon sample rows")
    signals, notes = {}, []
    for col, (sig, scale) in _COLS.items():
        if col not in cols:
            continue
        for gid, rows in samples.items():
            vals = [float(r[col]) * scale for r in rows if re.fullmatch(r"\d+(\.\d+)?", r.get(col, "-"))]
            if vals:
                signals.setdefault(sig, {})[gid] = mean(vals)
                if col == "sm" and max(vals) - min(vals) >= 0.5:
                    notes.append(f"{gid}: sm util ranged {min(vals):.0%}-{max(vals):.0%} over {len(vals)} samples; "
                                 f"the average {mean(vals):.2f} mixes idle and loaded periods")
    if "pviol" in cols:
        for gid, rows in samples.items():
            vals = [float(r["pviol"]) / 100 for r in rows if re.fullmatch(r"\d+(\.\d+)?", r["pviol"])]
            if vals:
                capped = mean(vals) >= POWER_CAPPED_SHARE
                signals.setdefault("throttle_reasons", {})[gid] = ["sw_power_cap"] if capped else []
                if capped:
                    notes.append(f"{gid}: power-capped for {mean(vals):.0%} of the capture (pviol)")
    missing = [c for c in _BASIC if c not in cols]
    if missing:
        notes.append(f"columns not in this dmon selection: {', '.join(missing)}")
    ctx = {"columns": cols, "samples": {g: len(r) for g, r in samples.items()}, "gpu_count": len(samples)}
    return Artifact("nvidia_smi_dmon", signals, ctx, notes)
