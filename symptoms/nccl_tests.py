"""nccl-tests output (all_reduce_perf, all_gather_perf, ...) with optional NCCL_DEBUG=INFO lines.

nccl_busbw_gb_per_s: out-of-place busbw averaged over the 3 largest sizes (the plateau; the tool's own
"Avg bus bandwidth" averages every size and is kept in context). nccl_transport: from the "via ..." channel
lines when present, else from "Using network ...".
"""
import re
from collections import Counter

from .common import Artifact, add_env_overrides, fail, mean, strip_mpi

_ROW = re.compile(r"^\s*\d+\s+\d+\s+\w+\s+\w+\s")
_VIA = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : .* via (\S.*?)\s*$")   # "Channel 00/0 :" or "Channel 00 :"
_NET_NAMES = {"ib": "NET/IB", "socket": "NET/Socket"}
TOP_SIZES = 3


def _net(name: str) -> str:
    low = name.lower()
    if "libfabric" in low or "ofi" in low:
        return "NET/OFI"
    return _NET_NAMES.get(low, f"NET/{name}")


def detect(text: str) -> bool:
    head = text[:200000]
    return re.search(r"(?m)^(?:\[\d+,\d+\]<stdout>:)?#\s+size\s+count\s+type", head) is not None or (
        "# nThread" in head and "nGpus" in head)


def parse(text: str, where: str) -> Artifact:
    cols, rows, tables, avg_line = None, [], 0, None
    ctx, notes = {}, []
    nodes, devices = set(), []
    n = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = strip_mpi(raw).rstrip()
        if re.match(r"^#\s+size\s+count\s", line):
            cols, rows, tables = line.lstrip("#").split(), [], tables + 1
            continue
        if m := re.match(r"^#\s+Rank\s+\d+ .*? on (\S+) device\s+\d+ \[[^\]]*\]\s+(.+)$", line):
            devices.append((m.group(1), m.group(2).strip()))
        if m := re.search(r"# Avg bus bandwidth\s*:\s*([\d.]+)", line):
            avg_line = float(m.group(1))
        if m := re.search(r"nNodes (\d+)", line):
            nodes.add(int(m.group(1)))
        if cols and _ROW.match(line):
            vals = line.split()
            if len(vals) != len(cols):
                fail(where, n, "row", f"{len(vals)} fields, header has {len(cols)}: line cut off")
            rows.append((int(vals[0]), float(vals[cols.index("busbw")]), n))
    if cols is None:
        fail(where, n or 1, "table", "no nccl-tests results table ('#  size  count  type ...' header)")
    if not rows:
        fail(where, n, "table", "results table has no rows")
    if avg_line is None:
        fail(where, n, "Avg bus bandwidth", "no '# Avg bus bandwidth' summary after the table: run cut short or file truncated")
    top = sorted(rows)[-TOP_SIZES:]
    signals = {"nccl_busbw_gb_per_s": mean(b for _, b, _ in top)}
    ctx.update(avg_busbw_all_sizes=avg_line, largest_size_bytes=top[-1][0], sizes=len(rows))
    if devices:
        ctx["ranks"] = len(devices)
        ctx["hosts"] = len({h for h, _ in devices})
        ctx["gpu"] = ", ".join(sorted({d for _, d in devices}))
    if nodes:
        ctx["nodes"] = max(nodes)
    if tables > 1:
        notes.append(f"{tables} results tables in the file; the last one is used")
    notes.append(f"busbw {signals['nccl_busbw_gb_per_s']:.2f} GB/s = mean out-of-place busbw of the {len(top)} largest "
                 f"sizes; the tool's 'Avg bus bandwidth' {avg_line:g} averages all sizes")
    read_nccl_info(text.splitlines(), signals, ctx, notes)
    return Artifact("nccl_tests", signals, ctx, notes)


def read_nccl_info(lines, signals: dict, ctx: dict, notes: list):
    """What NCCL_DEBUG=INFO lines say: the version, the transport, GPUDirect RDMA and the environment's settings."""
    via, using, gdr_lines, ofi = Counter(), Counter(), [], False
    for raw in lines:
        line = strip_mpi(raw).rstrip()
        if "nccl" not in ctx and (m := re.search(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda([\d.]+))?", line)):
            ctx["nccl"] = m.group(1)
            if m.group(2):
                ctx["nccl_cuda"] = m.group(2)
        if m := _VIA.search(line):
            via[m.group(1)] += 1
        if m := re.search(r"NCCL INFO Using network (.+?)\s*$", line):
            using[m.group(1)] += 1
        ofi = ofi or "NET/OFI" in line
        if m := re.search(r"GPU Direct RDMA (Enabled|Disabled)", line):
            gdr_lines.append(m.group(1) == "Enabled")
    _transport(via, using, ofi, gdr_lines, signals, ctx, notes)
    add_env_overrides(lines, signals, notes)



def _transport(via, using, ofi, gdr_lines, signals, ctx, notes):
    """Fill nccl_transport / gdr_enabled; the channel lines win over "Using network"."""
    net = Counter()
    intra = Counter()
    for path, count in via.items():
        parts = path.split("/")
        if parts[0] == "NET" and len(parts) > 1:
            net[_net(parts[1])] += count
        else:
            intra["/".join(parts[:2])] += count
    chosen = ", ".join(using) if using else None
    if net:
        signals["nccl_transport"] = net.most_common(1)[0][0]
        ctx["nccl_channels"] = dict(via)
        gdr = [("GDRDMA" in p) for p in via if p.startswith("NET/")]
        signals["gdr_enabled"] = all(gdr)
        if any(gdr) and not all(gdr):
            notes.append("GDRDMA on some NET channels only")
    elif intra:
        literal = intra.most_common(1)[0][0]
        ctx["nccl_channels"] = dict(via)
        ctx["nccl_intra_transport"] = literal
        kind = literal.split("/")[0]
        signals["nccl_transport"] = "SHM" if kind == "SHM" else ("P2P/NVLink" if "NVL" in literal else "P2P/IPC")
        if kind == "P2P":
            notes.append(f"intra-node channels use {literal}; the log does not say NVLink or PCIe "
                         "(nccl_transport reports the P2P class; see nvidia-smi topo -m)")
        if chosen:
            notes.append(f"'Using network {chosen}' was logged but all {sum(intra.values())} channels are intra-node "
                         f"({', '.join(intra)}): the network transport is unused, not a fallback")
    elif using:
        name = using.most_common(1)[0][0]
        signals["nccl_transport"] = "NET/OFI" if ofi else _net(name)
        notes.append(f"no 'Channel ... via' lines: transport taken from 'Using network {chosen}'; "
                     "if all ranks share one node it may be unused")
    if gdr_lines and "gdr_enabled" not in signals and signals.get("nccl_transport", "").startswith("NET/"):
        signals["gdr_enabled"] = all(gdr_lines)
    if signals.get("nccl_transport") == "NET/Socket":
        notes.append("NCCL uses TCP sockets between nodes: no InfiniBand/EFA plugin or device was found")
