"""perftest `ib_write_bw` output -> BW average at the largest message size in Gb/s.

perftest's MB/sec is 2^20 bytes/s: Gb/s = MB/s * 1048576 * 8 / 1e9. With --report_gbits the header says
Gb/sec and the value is used as is. Client and server output may be concatenated or interleaved.
"""
import re

from .common import Artifact, fail, mean

_HEAD = re.compile(r"^#bytes\s+#iterations\s+BW peak\[(\w+)/sec\]\s+BW average\[(\w+)/sec\]")
_ROW = re.compile(r"^(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")


def detect(text: str) -> bool:
    return "RDMA_Write BW Test" in text[:5000]


def parse(text: str, where: str) -> Artifact:
    unit, rows, ctx, n = None, [], {}, 0
    lids = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if m := _HEAD.match(line):
            unit = m.group(2)
            continue
        for key, name in (("Device", "device"), ("Link type", "link_type"), ("Transport type", "transport"),
                          ("Mtu", "mtu"), ("Number of qps", "qps"), ("Connection type", "connection")):
            if m := re.search(rf"(?:^|\s){re.escape(key)}\s*:\s*(\S+)", line):
                ctx[name] = m.group(1)
        if m := re.match(r"^(local|remote) address: LID (\S+)", line):
            lids.setdefault(m.group(1), set()).add(m.group(2))
        if unit and line[:1].isdigit():
            m = _ROW.match(line)
            if not m:
                fail(where, n, "row", "result row is cut off or malformed")
            rows.append((int(m.group(1)), float(m.group(4))))
    if unit is None:
        fail(where, n or 1, "BW average", "no '#bytes #iterations BW peak ... BW average' results header")
    if not rows:
        fail(where, n, "BW average", "results header but no result rows: test did not finish or file truncated")
    if unit.lower() in ("mb", "mib"):
        scale = 1048576 * 8 / 1e9
    elif unit.lower() == "gb":
        scale = 1.0
    else:
        fail(where, n, "unit", f"unknown bandwidth unit {unit}/sec")
    size = max(s for s, _ in rows)
    at_max = [bw for s, bw in rows if s == size]
    gbit = mean(at_max) * scale
    notes = [f"BW average {mean(at_max):g} {unit}/sec at {size} B" + (f" = {gbit:.1f} Gb/s (MB = 2^20 bytes)" if scale != 1 else "")]
    if len(set(at_max)) > 1:
        notes.append(f"{len(at_max)} results at {size} B differ ({min(at_max):g}-{max(at_max):g}); their mean is used")
    if lids.get("local") and lids.get("local") == lids.get("remote"):
        notes.append("loopback test (same LID both ends): measures the HCA and its PCIe path, not the fabric")
    ctx.update(message_bytes=size, sizes=len({s for s, _ in rows}))
    return Artifact("ib_write_bw", {"ib_write_bw_gbit_per_s": gbit}, ctx, notes)
