"""`nvidia-smi topo -m` (optionally followed by `topo -p2p <x>`) -> topology in context and notes.

Link types, nearest NICs, CPU/NUMA affinity and P2P status go to context, a summary to notes; the path types
between GPU pairs fill the signal gpu_pair_paths. With a P2P
matrix (read, write, atomics or prop; not the NVLink one, `-p2p n`) the signal gpu_p2p_ok says whether every
GPU pair shows OK.
"""
import re

from .common import Artifact, fail

# closeness of a path type; lower is closer ("NV12" etc. are NVLink)
_RANK = {"X": 0, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6}
_DEV = re.compile(r"^(GPU|NIC)\d+$|^mlx\d+_\d+$")


def _rank(link: str) -> int:
    return 1 if link.startswith("NV") else _RANK.get(link, 9)


def detect(text: str) -> bool:
    return re.search(r"(?m)^\s+GPU0(\s+\S+)*\s*$", text[:3000]) is not None and "Legend" in text


def _matrix(lines, start, where):
    """Read one matrix whose column header is lines[start]; return (columns, {row: [values]}, next index)."""
    cols = re.split(r"\t+|\s{2,}", lines[start].strip())
    ndev = sum(1 for c in cols if _DEV.match(c))
    rows, i = {}, start + 1
    while i < len(lines) and lines[i].strip():
        vals = lines[i].split()
        name, vals = vals[0], vals[1:]
        if not _DEV.match(name):
            break
        if name.startswith("GPU") and len(vals) != len(cols):
            fail(where, i + 1, name, f"{len(vals)} fields, header has {len(cols)}: row cut off")
        if len(vals) < ndev:
            fail(where, i + 1, name, f"{len(vals)} link fields, expected {ndev}: row cut off")
        rows[name] = vals
        i += 1
    gpus = [c for c in cols if c.startswith("GPU") and _DEV.match(c)]
    missing = [g for g in gpus if g not in rows]
    if missing:
        fail(where, i, missing[0], f"matrix has no row for {', '.join(missing)}: file truncated?")
    return cols, rows, i


def parse(text: str, where: str) -> Artifact:
    lines = text.splitlines()
    mats, i = [], 0
    while i < len(lines):
        if re.match(r"^\s+GPU0\b", lines[i]):
            prompts = [m.group(1) for line in lines[:i] for m in [re.search(r"topo\s+-p2p\s+(\w)", line)] if m]
            cols, rows, i = _matrix(lines, i, where)
            mats.append((cols, rows, prompts[-1] if prompts else None))
        else:
            i += 1
    if not mats:
        fail(where, len(lines) or 1, "GPU0", "no topology matrix (header row starting with GPU0)")
    nic_names = dict(re.findall(r"(?m)^\s*(NIC\d+):\s*(\S+)", text))
    cols, rows, _ = mats[0]
    dev = [c for c in cols if _DEV.match(c)]
    gpus = [c for c in dev if c.startswith("GPU")]
    nics = [c for c in dev if not c.startswith("GPU")]
    gid = lambda g: "gpu" + g[3:]
    links, nearest, cpu, numa = {}, {}, {}, {}
    for g in gpus:
        row = dict(zip(cols, rows[g]))
        for h in gpus[gpus.index(g) + 1:]:
            links[f"{gid(g)}-{gid(h)}"] = row[h]
        if nics:
            best = min(_rank(row[n]) for n in nics)
            nearest[gid(g)] = {"link": next(row[n] for n in nics if _rank(row[n]) == best),
                               "nics": [nic_names.get(n, n) for n in nics if _rank(row[n]) == best]}
        if "CPU Affinity" in row:
            cpu[gid(g)] = row["CPU Affinity"]
        if "NUMA Affinity" in row:
            numa[gid(g)] = row["NUMA Affinity"]
    p2p = {}
    for pcols, prows, option in mats[1:]:
        if option == "n":   # NVLink P2P capability: NS there says nothing about PCIe peer access
            continue
        pg = [c for c in pcols if c.startswith("GPU")]
        for a in pg:
            for b in pg[pg.index(a) + 1:]:
                p2p[f"{gid(a)}-{gid(b)}"] = dict(zip(pcols, prows[a]))[b]
    ctx = {"gpu_count": len(gpus), "nic_count": len(nics), "gpu_links": links, "nearest_nic": nearest,
           "cpu_affinity": cpu, "numa_affinity": numa, "nic_names": {n: nic_names.get(n, n) for n in nics}}
    if p2p:
        ctx["p2p"] = p2p
    notes = []
    kinds = sorted(set(links.values()))
    if len(kinds) == 1 and len(links) > 3:
        notes.append(f"all {len(links)} GPU pairs {kinds[0]}")
    else:
        for pair, link in links.items():
            extra = f"; P2P not supported ({p2p[pair]})" if p2p.get(pair, "OK") != "OK" else ""
            notes.append(f"{pair} {link}{extra}")
    bad = [pair for pair, v in p2p.items() if v != "OK"]
    if bad and len(kinds) == 1 and len(links) > 3:
        notes.append(f"P2P not supported on {', '.join(bad)}")
    if any(not v.startswith("NV") for v in links.values()):
        notes.append("some GPU pairs have no NVLink: their traffic crosses PCIe"
                     + (" or the CPU interconnect (SYS)" if "SYS" in kinds else ""))
    for g, v in nearest.items():
        if v["link"] in ("SYS", "NODE", "PHB"):
            notes.append(f"{g}: nearest NIC is {v['link']} away ({', '.join(v['nics'])}): GPUDirect RDMA may be slow or off")
    if numa and len(set(numa.values())) > 1:
        notes.append("GPUs span NUMA nodes " + ", ".join(sorted(set(numa.values()))) + ": pin each rank to its GPU's node")
    signals = {"gpu_p2p_ok": not bad} if p2p else {}
    if links:
        signals["gpu_pair_paths"] = sorted({"NVLINK" if v.startswith("NV") else v for v in links.values()}, key=_rank)
    return Artifact("nvidia_smi_topo", signals, ctx, notes)
