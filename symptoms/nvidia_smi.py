"""`nvidia-smi -q` (text) and `nvidia-smi -q -x` (XML) -> per-GPU signals.

GPU entity ids are "gpu0".."gpuN" in file order; the bus id of each is in context["bus_ids"] and the notes.
"""
import re
import xml.etree.ElementTree as ET

from .common import Artifact, fail, num

# nvidia-smi reason name (text heading, or XML tag suffix) -> KB throttle_reasons id
_REASONS = {
    "sw power cap": "sw_power_cap", "sw_power_cap": "sw_power_cap",
    "hw slowdown": "hw_slowdown", "hw_slowdown": "hw_slowdown",
    "hw thermal slowdown": "hw_thermal_slowdown", "hw_thermal_slowdown": "hw_thermal_slowdown",
    "sw thermal slowdown": "sw_thermal_slowdown", "sw_thermal_slowdown": "sw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake", "hw_power_brake_slowdown": "hw_power_brake",
}
_IDLE_REASONS = {"idle", "gpu idle", "gpu_idle"}
_BUS = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def detect(text: str) -> bool:
    """True for either the text or the XML report."""
    return detect_q(text) or detect_xml(text)


def parse(text: str, where: str) -> Artifact:
    return parse_xml(text, where) if detect_xml(text) else parse_q(text, where)


def detect_q(text: str) -> bool:
    head = text[:4000]
    return re.search(r"(?m)^=+NVSMI LOG=+\s*$", head) is not None or (
        re.search(r"(?m)^Driver Version\s+:", head) is not None and re.search(r"(?m)^GPU [0-9A-Fa-f]{4,8}:", head) is not None)


def detect_xml(text: str) -> bool:
    return "<nvidia_smi_log" in text[:2000]


# ---------------------------------------------------------------- text

def _read_q(text: str):
    """Split the report into a header dict and one {path tuple: value} dict per GPU block."""
    header, gpus = {}, []
    stack: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("==="):
            continue
        m = _BUS.match(line)
        if m:
            gpus.append({"bus": m.group(1), "line": n, "last": n, "f": {}, "procs": []})
            stack = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        key, value = key.strip(), value.strip()
        if not gpus:
            if sep:
                header[key] = value
            continue
        level = max(indent // 4 - 1, 0)
        stack = stack[:level] + [key]
        gpus[-1]["f"][tuple(stack)] = value if sep else None
        gpus[-1]["last"] = n
        procs = gpus[-1]["procs"]
        if stack[0] == "Processes" and key == "Process ID":
            procs.append({"pid": value, "type": None, "name": None, "mib": None})
        elif stack[0] == "Processes" and procs and key in ("Type", "Name", "Used GPU Memory"):
            procs[-1][{"Type": "type", "Name": "name", "Used GPU Memory": "mib"}[key]] = value
    return header, gpus


def _first(f: dict, *paths):
    for p in paths:
        v = f.get(p)
        if v not in (None, "", "N/A"):
            return v
    return None


def _gpu_from_q(g: dict) -> dict:
    f = g["f"]
    power = [("GPU Power Readings",), ("Power Readings",)]
    link = ("PCI", "GPU Link Info")
    reasons, idle = [], None
    for path, value in f.items():
        if path[0] in ("Clocks Event Reasons", "Clocks Throttle Reasons") and len(path) > 1:
            name = path[-1].lower()
            if name in _REASONS and value == "Active":
                reasons.append(_REASONS[name])
            if name in _IDLE_REASONS:
                idle = value == "Active"
    dbe = _first(f, ("ECC Errors", "Volatile", "Double Bit", "Total"))
    if dbe is None:
        parts = [num(v) for p, v in f.items() if len(p) == 3 and p[:2] == ("ECC Errors", "Volatile")
                 and "Uncorrectable" in p[2] and num(v) is not None]
        dbe = sum(parts) if parts else None
    remap = _first(f, ("Remapped Rows", "Remapping Failure Occurred"))
    return {
        "bus": g["bus"], "name": _first(f, ("Product Name",)),
        "pstate": _first(f, ("Performance State",)), "mig": _first(f, ("MIG Mode", "Current")),
        "sm": num(_first(f, ("Clocks", "SM"))),
        "power": num(_first(f, *[p + (k,) for p in power for k in
                                 ("Power Draw", "Instantaneous Power Draw", "Average Power Draw")])),
        "limit": num(_first(f, *[p + (k,) for p in power for k in
                                 ("Current Power Limit", "Enforced Power Limit", "Power Limit")])),
        "temp": num(_first(f, ("Temperature", "GPU Current Temp"))),
        "reasons": reasons, "idle": idle,
        "fb_used": num(_first(f, ("FB Memory Usage", "Used"))),
        "fb_total": num(_first(f, ("FB Memory Usage", "Total"))),
        "gen": num(_first(f, link + ("PCIe Generation", "Current"))),
        "gen_max": num(_first(f, link + ("PCIe Generation", "Max"))),
        "width": num(_first(f, link + ("Link Width", "Current"))),
        "width_max": num(_first(f, link + ("Link Width", "Max"))),
        "dbe": dbe if dbe is None or isinstance(dbe, float) else num(dbe),
        "remap_fail": None if remap is None else int(remap.lower() == "yes"),
        "remap_pending": _first(f, ("Remapped Rows", "Pending")),
        "util": num(_first(f, ("Utilization", "Gpu"))),
    }


def parse_q(text: str, where: str) -> Artifact:
    """Parse `nvidia-smi -q` / `nvidia-smi -a` text."""
    header, blocks = _read_q(text)
    if not blocks:
        fail(where, len(text.splitlines()) or 1, "GPU", "no 'GPU 0000xxxx:xx:xx.x' block found: not nvidia-smi -q output?")
    full = ("Product Name",) in blocks[0]["f"]
    for b in blocks:
        if full and ("Processes",) not in b["f"]:
            fail(where, b["last"], f"GPU {b['bus']}", "block ends before its 'Processes' section: file truncated?")
    gpus = [_gpu_from_q(b) for b in blocks]
    procs = [(i, p["pid"], p["type"], p["name"], num(p["mib"])) for i, b in enumerate(blocks) for p in b["procs"]]
    listed = all(("Processes",) in b["f"] for b in blocks)
    return _build("nvidia_smi_q", where, header.get("Driver Version"), header.get("CUDA Version"),
                  num(header.get("Attached GPUs")), gpus, procs if listed else None)


# ---------------------------------------------------------------- XML

def _x(el, *paths):
    for p in paths:
        v = el.findtext(p)
        if v not in (None, "", "N/A"):
            return v.strip()
    return None


def _gpu_from_xml(g) -> dict:
    pw = ("gpu_power_readings", "power_readings")
    reasons, idle = [], None
    for sec in ("clocks_event_reasons", "clocks_throttle_reasons"):
        for child in g.findall(sec + "/*"):
            name = re.sub(r"^clocks_(?:event|throttle)_reason_", "", child.tag)
            if name in _REASONS and (child.text or "").strip() == "Active":
                reasons.append(_REASONS[name])
            if name in _IDLE_REASONS:
                idle = (child.text or "").strip() == "Active"
    dbe = num(_x(g, "ecc_errors/volatile/double_bit/total"))
    if dbe is None:
        parts = [num(c.text) for c in g.findall("ecc_errors/volatile/*")
                 if "uncorrectable" in c.tag and num(c.text) is not None]
        dbe = sum(parts) if parts else None
    remap = _x(g, "remapped_rows/remapped_row_failure")
    link = "pci/pci_gpu_link_info/"
    return {
        "bus": g.get("id") or _x(g, "pci/pci_bus_id"), "name": _x(g, "product_name"),
        "pstate": _x(g, "performance_state"), "mig": _x(g, "mig_mode/current_mig"),
        "sm": num(_x(g, "clocks/sm_clock")),
        "power": num(_x(g, *[f"{p}/{k}" for p in pw for k in ("power_draw", "instant_power_draw", "average_power_draw")])),
        "limit": num(_x(g, *[f"{p}/{k}" for p in pw for k in ("current_power_limit", "enforced_power_limit", "power_limit")])),
        "temp": num(_x(g, "temperature/gpu_temp")),
        "reasons": reasons, "idle": idle,
        "fb_used": num(_x(g, "fb_memory_usage/used")), "fb_total": num(_x(g, "fb_memory_usage/total")),
        "gen": num(_x(g, link + "pcie_gen/current_link_gen")), "gen_max": num(_x(g, link + "pcie_gen/max_link_gen")),
        "width": num(_x(g, link + "link_widths/current_link_width")),
        "width_max": num(_x(g, link + "link_widths/max_link_width")),
        "dbe": dbe, "remap_fail": None if remap is None else int(remap.lower() == "yes"),
        "remap_pending": _x(g, "remapped_rows/remapped_row_pending"),
        "util": num(_x(g, "utilization/gpu_util")),
    }


def parse_xml(text: str, where: str) -> Artifact:
    """Parse `nvidia-smi -q -x` XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        fail(where, e.position[0], "xml", f"not well-formed XML ({e}): file truncated?")
    if root.tag != "nvidia_smi_log":
        fail(where, 1, root.tag, "root element is not <nvidia_smi_log>")
    blocks = root.findall("gpu")
    if not blocks:
        fail(where, len(text.splitlines()), "gpu", "no <gpu> element")
    procs = [(i, _x(p, "pid"), _x(p, "type"), _x(p, "process_name"), num(_x(p, "used_memory")))
             for i, g in enumerate(blocks) for p in g.findall("processes/process_info")]
    listed = all(g.find("processes") is not None for g in blocks)
    return _build("nvidia_smi_xml", where, _x(root, "driver_version"), _x(root, "cuda_version"),
                  num(_x(root, "attached_gpus")), [_gpu_from_xml(g) for g in blocks], procs if listed else None)


# ---------------------------------------------------------------- shared

def compute_tenants(procs, gpus) -> tuple[dict, list]:
    """Compute processes per GPU from (gpu index, pid, type, name, MiB) rows, and notes about them.

    A process counts on a GPU when it holds at least a quarter of its largest footprint there: the near-empty
    CUDA contexts that DDP ranks or stray `.cuda()` calls leave on other GPUs (0 to a few hundred MiB) are
    not tenants. The MPS control server is not a tenant either, nor a C+G process with no memory reading
    (Windows lists every desktop app that way). A GPU with memory in use but no process
    listed gets no count: nvidia-smi inside a container does not see other PID namespaces.
    """
    def tenant(kind, name, mib):
        if not kind or "C" not in kind or (name or "").endswith("nvidia-cuda-mps-server"):
            return False
        return kind != "C+G" or bool(mib)   # on Windows (WDDM) every desktop app is C+G with memory N/A
    rows = [r for r in procs if tenant(r[2], r[3], r[4])]
    peak = {}
    for _, pid, _, _, mib in rows:
        known = peak.get(pid, 0)
        peak[pid] = None if mib is None or known is None else max(known, mib)
    counts, notes, members = {}, [], {}
    for i, pid, _, name, mib in rows:
        if mib is None or peak[pid] is None or (mib > 0 and mib >= 0.25 * peak[pid]):
            members.setdefault(i, []).append(f"{pid} {name or '?'} {'?' if mib is None else f'{mib:g}'} MiB")
        else:
            notes.append(f"process {pid} holds {mib:g} MiB on gpu{i} against {peak[pid]:g} MiB on its main GPU: "
                         f"a stray CUDA context, not counted as a tenant of gpu{i}")
    for i, g in enumerate(gpus):
        used = g["fb_used"] or 0
        if (g["mig"] or "").lower() == "enabled":
            continue   # MIG instances have their own SMs and memory: several processes do not time-slice
        if i not in members and g["fb_total"] and used > 0.05 * g["fb_total"]:
            notes.append(f"no compute process listed on gpu{i} though {used:g} MiB are in use: nvidia-smi inside a "
                         "container does not see other namespaces' processes; run it on the host to count tenants")
            continue
        counts[f"gpu{i}"] = len(members.get(i, []))
        if counts[f"gpu{i}"] > 1:
            notes.append(f"gpu{i} is shared by {counts[f'gpu{i}']} compute processes ({'; '.join(members[i])}): "
                         "without MIG they time-slice the GPU and share its memory")
    if any((r[3] or "").endswith("nvidia-cuda-mps-server") for r in procs):
        notes.append("the MPS control server runs on this host: clients share SMs concurrently")
    return counts, notes


def _build(kind, where, driver, cuda, attached, gpus, procs=None) -> Artifact:
    """Signals, context and notes from per-GPU readings; `procs` None means the file has no process list."""
    sig = {k: {} for k in ("sm_clock_mhz", "power_w", "power_limit_w", "temp_c", "throttle_reasons", "fb_used_frac",
                           "pcie_link_gen", "pcie_link_width", "ecc_dbe_errors", "row_remap_failures", "gpu_util",
                           "gpu_compute_procs")}
    notes, bus_ids, downshift = [], {}, {}
    for i, g in enumerate(gpus):
        gid, bus = f"gpu{i}", g["bus"]
        bus_ids[gid] = bus
        put = lambda key, v: v is not None and sig[key].__setitem__(gid, v)
        put("sm_clock_mhz", g["sm"]); put("power_w", g["power"]); put("power_limit_w", g["limit"])
        put("temp_c", g["temp"]); put("row_remap_failures", g["remap_fail"])
        put("ecc_dbe_errors", None if g["dbe"] is None else int(g["dbe"]))
        put("pcie_link_gen", g["gen"]); put("pcie_link_width", g["width"])
        put("gpu_util", None if g["util"] is None else g["util"] / 100)
        if g["reasons"] is not None:
            sig["throttle_reasons"][gid] = g["reasons"]
        if g["fb_used"] is not None and g["fb_total"]:
            sig["fb_used_frac"][gid] = g["fb_used"] / g["fb_total"]
        idle = bool(g["idle"]) or g["util"] == 0 or (num(g["pstate"]) or 0) >= 8
        if "sw_power_cap" in (g["reasons"] or ()) and (idle or (g["power"] and g["limit"] and g["power"] < 0.5 * g["limit"])):
            notes.append(f"SW power cap active at idle on {bus} ({gid}, {g['power']} W of {g['limit']} W, "
                         f"{g['pstate']}): not a load throttle")
        for what, cur, top in (("gen", g["gen"], g["gen_max"]), ("width", g["width"], g["width_max"])):
            if cur is not None and top is not None and cur < top:
                downshift.setdefault((what, cur, top, idle), []).append(gid)
        if (g["mig"] or "").lower() == "enabled":
            notes.append(f"MIG enabled on {gid} ({bus}): utilization and clocks are for the whole GPU, not per instance")
        if (g["remap_pending"] or "").lower() == "yes":
            notes.append(f"{gid} ({bus}) has a row remap pending: reset the GPU to apply it")
    for (what, cur, top, idle), ids in downshift.items():
        why = " at idle: links downshift to save power; recheck under load" if idle else ""
        notes.append(f"PCIe link {what} {cur:g} < max {top:g} on {', '.join(ids)}{why}")
    notes.insert(0, "GPU ids by order: " + ", ".join(f"{k}={v}" for k, v in bus_ids.items()))
    if procs is not None:
        sig["gpu_compute_procs"], proc_notes = compute_tenants(procs, gpus)
        notes += proc_notes
    if gpus and all(g["util"] == 0 for g in gpus):
        notes.append("all GPUs at 0% utilization when captured: clocks, power and PCIe gen are idle values")
    if attached and int(attached) != len(gpus):
        notes.append(f"header says {int(attached)} attached GPUs but the file has {len(gpus)} GPU sections")
    listed = {"gpus_visible": {"node": len(gpus)}} if gpus else {}
    names = sorted({g["name"] for g in gpus if g["name"]})
    ctx = {"gpu": ", ".join(names), "driver": driver, "cuda": cuda, "gpu_count": len(gpus), "bus_ids": bus_ids}
    return Artifact(kind, {k: v for k, v in sig.items() if v} | listed, {k: v for k, v in ctx.items() if v}, notes)
