"""`iostat -x` (sysstat) -> disk read latency/throughput per device and CPU iowait/steal.

The first report covers the time since boot; when interval reports follow, only those are used and each
value is taken from the worst interval: per device the interval where it was busiest (%util), for the CPU
the highest %iowait / %steal. Devices under 1% util are ignored (their r_await is noise).
"""
import re

from .common import Artifact, fail

ACTIVE_UTIL = 1.0   # %util below which a device counts as idle


def detect(text: str) -> bool:
    head = text[:20000]
    return re.search(r"(?m)^Device:?\s+.*\br/s\b", head) is not None and (
        "avg-cpu:" in head or re.search(r"(?m)^Device:?\s+.*%util", head) is not None)


def _reports(text: str, where: str):
    reports, cols, in_cpu, n = [], None, None, 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            cols = None
            continue
        if line.startswith("avg-cpu:"):
            reports.append({"cpu": {}, "dev": {}, "line": n})
            in_cpu = line.split()[1:]
            continue
        if in_cpu:
            vals = line.split()
            if len(vals) != len(in_cpu):
                fail(where, n, "avg-cpu", f"{len(vals)} values for {len(in_cpu)} columns: line cut off")
            reports[-1]["cpu"] = dict(zip(in_cpu, map(float, vals)))
            in_cpu = None
            continue
        if re.match(r"^Device:?\s", line):
            cols = line.split()[1:]
            if not reports or reports[-1]["dev"]:
                reports.append({"cpu": {}, "dev": {}, "line": n})
            continue
        if cols:
            vals = line.split()
            if len(vals) != len(cols) + 1:
                fail(where, n, vals[0], f"{len(vals) - 1} values for {len(cols)} columns: line cut off")
            try:
                reports[-1]["dev"][vals[0]] = dict(zip(cols, map(float, vals[1:])))
            except ValueError:
                fail(where, n, vals[0], "non-numeric value in a device row")
    return reports, n


def parse(text: str, where: str) -> Artifact:
    reports, n = _reports(text, where)
    if not any(r["dev"] for r in reports):
        fail(where, n or 1, "Device", "no 'Device ... r/s ...' table: not iostat -x output?")
    notes, ctx = [], {}
    if m := re.match(r"^Linux (\S+) \((\S+)\).*\((\d+) CPU\)", text):
        ctx.update(kernel=m.group(1), host=m.group(2), cpus=int(m.group(3)))
    used = reports[1:] if len(reports) > 1 else reports
    if len(reports) > 1:
        notes.append(f"{len(reports)} reports: the first (since boot) is skipped; values are the worst of {len(used)} intervals")
    else:
        notes.append("single report: values are averages since boot, not the current load")
    first = len(reports) - len(used) + 1      # report number of used[0], 1-based
    rows = {}
    for i, rep in enumerate(used):
        for dev, row in rep["dev"].items():
            rows.setdefault(dev, []).append((row.get("%util", 0.0), first + i, row))
    lat, rd, util, skipped = {}, {}, {}, []
    for dev, cand in rows.items():
        active = [c for c in cand if c[0] >= ACTIVE_UTIL and c[2].get("r/s", 0.0) > 0]
        if not active:
            slow = [c[2].get("r_await", c[2].get("await", 0.0)) for c in cand if c[2].get("r/s", 0.0) > 0]
            if slow and max(slow) > 0:
                skipped.append(f"{dev} {max(slow):g} ms")
            continue
        u, rep_no, row = max(active, key=lambda c: c[0])
        util[dev], lat[dev] = u, row.get("r_await", row.get("await"))
        rd[dev] = row["rMB/s"] if "rMB/s" in row else row.get("rkB/s", 0.0) / 1024
        if u >= 80:
            notes.append(f"{dev} {u:g}% util, r_await {lat[dev]:g} ms, aqu-sz {row.get('aqu-sz', row.get('avgqu-sz', 0)):g} "
                         f"in report {rep_no}: disk busy")
    if skipped:
        notes.append(f"r_await ignored for devices under {ACTIVE_UTIL:g}% util: {', '.join(skipped)}")
    signals = {}
    if lat:
        signals["disk_read_latency_ms"] = {d: v for d, v in lat.items() if v is not None}
        signals["storage_read_mb_per_s"] = rd
    cpu = [r["cpu"] for r in used if r["cpu"]]
    for col, sig in (("%iowait", "cpu_iowait_frac"), ("%steal", "cpu_steal_frac")):
        vals = [c[col] for c in cpu if col in c]
        if vals:
            signals[sig] = max(vals) / 100
    if any(c and not any(c.values()) for c in cpu):
        notes.append("an avg-cpu line is all zeros (no CPU sample for that interval)")
    ctx["disk_util_pct"] = util
    ctx["reports"] = len(reports)
    return Artifact("iostat", signals, ctx, notes)
