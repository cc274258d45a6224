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
