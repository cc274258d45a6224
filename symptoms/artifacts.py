"""Registry of tool-output parsers and `load_artifact`, which picks one by content or by name."""
import gzip
import re

from perfdoctor.errors import InputError

from . import (bench_serving, engine_log, ib_write_bw, iostat, kineto, metrics_dump, nccl_log, nccl_tests, nvidia_smi,
               nvidia_smi_dmon, nvidia_smi_table, nvidia_smi_topo)
from .common import Artifact

# (kind, detect, parse) in detection order: an explicit list, no discovery.
PARSERS = [
    ("nvidia_smi_q", nvidia_smi.detect_q, nvidia_smi.parse_q),
    ("nvidia_smi_xml", nvidia_smi.detect_xml, nvidia_smi.parse_xml),
    ("nvidia_smi_table", nvidia_smi_table.detect, nvidia_smi_table.parse),
    ("nvidia_smi_dmon", nvidia_smi_dmon.detect, nvidia_smi_dmon.parse),
    ("nvidia_smi_topo", nvidia_smi_topo.detect, nvidia_smi_topo.parse),
    ("nccl_tests", nccl_tests.detect, nccl_tests.parse),
    ("ib_write_bw", ib_write_bw.detect, ib_write_bw.parse),
    ("iostat", iostat.detect, iostat.parse),
    ("kineto", kineto.detect, kineto.parse),
    ("engine_log", engine_log.detect, engine_log.parse),
    ("bench_serving", bench_serving.detect, bench_serving.parse),
    ("metrics_dump", metrics_dump.detect, metrics_dump.parse),
    ("nccl_log", nccl_log.detect, nccl_log.parse),   # last: other logs carry NCCL lines too
]
KINDS = [k for k, _, _ in PARSERS]

__all__ = ["Artifact", "PARSERS", "KINDS", "detect_kind", "load_artifact"]


def detect_kind(text: str) -> str | None:
    """First kind whose detector accepts the text, or None."""
    return next((k for k, det, _ in PARSERS if det(text)), None)


# terminal colour/underline codes: nvidia-smi topo -m underlines its header even when piped to a file
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read_text(path: str) -> str:
    """File contents as text; .gz (e.g. Kineto traces) is unpacked, terminal escape codes removed."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(path, "", f"cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise InputError(path, "gzip", f"cannot unpack: {e}") from None
    return _ANSI.sub("", raw.decode("utf-8", errors="replace"))


def load_artifact(path: str, kind: str | None = None, split=None, part: str = "current") -> Artifact:
    """Parse `path` with the parser for `kind`, or the one whose detector matches the content. `split` (an
    engine log only) keeps the status lines before that time (part baseline) or from it on (current)."""
    text = read_text(path)
    if kind is None:
        kind = detect_kind(text)
        if kind is None:
            raise InputError(f"{path}:1", "kind", "not a recognised tool output; give it as KIND=FILE with KIND one of "
                             + ", ".join(KINDS))
    parsers = {k: p for k, _, p in PARSERS}
    if kind not in parsers:
        raise InputError(path, "kind", f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    if split is not None:
        if kind != "engine_log":
            raise InputError(path, "--split-at", f"a {kind} output has no per-line times; only a vLLM or SGLang "
                             "server log can be split")
        return engine_log.parse(text, path, split, part)
    return parsers[kind](text, path)
