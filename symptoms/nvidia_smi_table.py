"""Plain `nvidia-smi` (the summary table) -> per-GPU temperature, power, memory, utilization and tenants.

Handles the pre-450 two-line GPU rows, the three-line rows with "MIG M.", and both Processes layouts
(with and without the GI/CI columns). GPU entity ids are "gpu0".."gpuN" by the table's GPU index.
"""
import re

from .common import Artifact, fail, num
from .nvidia_smi import _build

_HEAD = re.compile(r"^\|\s*NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)\s+CUDA Version:\s*(\S+)")
_BUS = r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
_GPU_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC)\s*\|\s*" + _BUS + r"\s+\S+\s*\|")
_STATE_ROW = re.compile(r"^\|\s*(\S+)\s+(\d+C|N/A)\s+(P\d+|N/A)\s+(\S+)\s*/\s*(\S+)\s*\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|"
                        r"\s*(\d+%|N/A)\s+(\S+)\s*\|$")
_MIG_ROW = re.compile(r"^\|\s*\|\s*\|\s*(\S+)\s*\|$")
_PROC_ROW = re.compile(r"^\|\s+(\d+)\s+(?:(\S+)\s+(\S+)\s+)?(\d+)\s+(C\+G|M\+C|C|G|M)\s+(.*?)\s+(\d+MiB|N/A)\s*\|$")


def detect(text: str) -> bool:
    head = text[:3000].splitlines()
    return any(_HEAD.match(l.strip()) for l in head) and any("Memory-Usage" in l for l in head)


def parse(text: str, where: str) -> Artifact:
    lines = [l.rstrip() for l in text.splitlines()]
    driver = cuda = None
    gpus, index, procs, in_procs, n = [], {}, None, False, 0
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if m := _HEAD.match(s):
            driver, cuda = m.group(2), None if m.group(3) == "N/A" else m.group(3)
        elif s.startswith("| Processes:"):
            in_procs, procs = True, []
        elif in_procs:
            if m := _PROC_ROW.match(s):
                gi, pid, kind, name, mib = int(m.group(1)), m.group(4), m.group(5), m.group(6), num(m.group(7))
                if gi not in index:
                    fail(where, n, f"GPU {gi}", "process row names a GPU index the table above does not list")
                procs.append((index[gi], pid, kind, name, mib))
            elif re.match(r"^\|\s+\d+\s", s):
                fail(where, n, "Processes", f"unreadable process row {s!r}")
        elif m := _GPU_ROW.match(s):
            state = _STATE_ROW.match(lines[n].strip()) if n < len(lines) else None
            if not state:
                fail(where, n + 1, f"GPU {m.group(1)}", "expected the 'Fan Temp Perf Pwr | Memory | Util' row "
                     "after the GPU name row: table truncated or reformatted?")
            mig = _MIG_ROW.match(lines[n + 1].strip()) if n + 1 < len(lines) else None
            index[int(m.group(1))] = len(gpus)
            gpus.append(_gpu(m.group(2), m.group(3), state, mig.group(1) if mig else None))
    if not gpus:
        fail(where, n or 1, "GPU", "no GPU rows found: not the nvidia-smi summary table?")
    if procs is None:
        fail(where, n or 1, "Processes", "file ends before the Processes table: truncated?")
    art = _build("nvidia_smi_table", where, driver, cuda, None, gpus, procs)
    if any(g["name"].endswith("...") for g in gpus):
        art.notes.append("GPU names are truncated by the table ('...'): nvidia-smi -L prints them in full")
    return art


def _gpu(name, bus, state, mig) -> dict:
    """A GPU record in the shape nvidia_smi._build expects; readings the table lacks are None."""
    util = None if state.group(8) == "N/A" else num(state.group(8))
    return {"bus": bus, "name": name.strip(), "pstate": state.group(3), "mig": mig, "sm": None,
            "power": num(state.group(4)), "limit": num(state.group(5)), "temp": num(state.group(2)),
            "reasons": None, "idle": None, "fb_used": num(state.group(6)), "fb_total": num(state.group(7)),
            "gen": None, "gen_max": None, "width": None, "width_max": None, "dbe": None, "remap_fail": None,
            "remap_pending": None, "util": util}
