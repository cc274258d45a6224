"""Shared pieces for the tool-output parsers: the Artifact record and small helpers."""
import re
from dataclasses import dataclass, field

from perfdoctor.errors import InputError


@dataclass
class Artifact:
    kind: str                                   # parser id, e.g. "nvidia_smi_q"
    signals: dict = field(default_factory=dict)  # signal id -> scalar, or {entity: value}
    context: dict = field(default_factory=dict)  # gpu name, driver, versions, topology ...
    notes: list = field(default_factory=list)    # caveats worth showing to the user


def fail(where: str, line: int, key: str, problem: str):
    """Raise InputError pointing at `where:line`."""
    raise InputError(f"{where}:{line}", key, problem)


_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


def num(text):
    """First number in `text` as float ("700.00 W" -> 700.0); None for N/A, '-', or no number."""
    if text is None:
        return None
    m = _NUM.search(text)
    return float(m.group()) if m else None


_MPI_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")


def strip_mpi(line: str) -> str:
    """Drop an Open MPI `--tag-output` prefix like "[1,0]<stdout>:"."""
    return _MPI_PREFIX.sub("", line)


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


# NCCL_DEBUG=INFO prints each NCCL variable the environment sets: "NCCL_P2P_DISABLE set by environment to 1."
# (ENV subsystem, on by default) and, for the NIC lists, "NCCL_IB_HCA set to mlx5_0".
_NCCL_ENV = re.compile(r"NCCL INFO (?:NET/\w+: )?(NCCL_[A-Z0-9_]+) set (?:by environment )?to (\S+?)\.?\s*$")
_NCCL_TUNING = {"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_MIN_CTAS",
                "NCCL_MAX_CTAS", "NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_TOPO_FILE", "NCCL_NET_GDR_LEVEL",
                "NCCL_NET_GDR_READ", "NCCL_CROSS_NIC", "NCCL_P2P_LEVEL", "NCCL_NTHREADS"}


def nccl_env_overrides(lines) -> tuple[list[str] | None, list[str]]:
    """The nccl_env_overrides classes the log's 'set by environment' lines show, and the variables set that no
    class covers. None when the log has no such line (NCCL_DEBUG below INFO, or the ENV subsystem filtered out:
    then nothing can be said about what was set)."""
    found, other, seen = set(), set(), False
    for line in lines:
        if not (m := _NCCL_ENV.search(line)):
            continue
        seen = True
        name, value = m[1], m[2].strip("'\"")
        if name == "NCCL_P2P_DISABLE" and value != "0" or name == "NCCL_P2P_LEVEL" and value.upper() in ("LOC", "0"):
            found.add("p2p_off")
        elif name == "NCCL_SHM_DISABLE" and value != "0":
            found.add("shm_off")
        elif name == "NCCL_IB_DISABLE" and value != "0" or name == "NCCL_NET" and value.lower() == "socket":
            found.add("ib_off")
        elif name in ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"):
            found.add("nic_pinned")
        elif name in _NCCL_TUNING:
            found.add("tuning")
        elif name not in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE"):
            other.add(f"{name}={value}")
    return (sorted(found) if seen else None), sorted(other)


def add_env_overrides(lines, signals: dict, notes: list):
    """nccl_env_overrides from the 'set by environment' lines, with a note naming variables no class covers."""
    overrides, other = nccl_env_overrides(lines)
    if overrides is not None:
        signals["nccl_env_overrides"] = overrides
        notes.append("NCCL settings from the environment: " + (", ".join(overrides) or "none that changes P2P, SHM, "
                     "IB, NIC choice or tuning") + (f" (also set: {', '.join(other)})" if other else ""))
