"""Snapshot files (YAML or JSON): what was observed, validated against the KB's signal vocabulary."""
import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from perfdoctor.errors import InputError
from perfdoctor.kb.hardware_schema import match_interconnect
from perfdoctor.kb.loader import KB
from perfdoctor.yamlio import load_file

NUMBER_UNIT = re.compile(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(\s*)(%|ms|us|s|min|[A-Za-z/]+)?")
SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0}
WORKLOAD_ALIASES = {"serving": "inference", "inference": "inference", "train": "training", "training": "training"}
CONTEXT_ALIASES = {"tensor_parallel": "tp", "tensor_parallel_size": "tp", "tp_size": "tp",
                   "pipeline_parallel": "pp", "pipeline_parallel_size": "pp",
                   "max_running_requests": "max_num_seqs", "max_batch_size": "max_num_seqs",
                   "max_concurrency": "client_concurrency", "concurrency": "client_concurrency"}
TOP_KEYS = {"context", "changes", "baseline", "current"}
POSITIVE_CONTEXT = {"nodes", "gpus_per_node", "model_params_b", "tp", "pp", "dp", "tokens_per_step", "gpus_per_replica",
                    "replicas", "gpus", "world_size", "global_batch_size", "seq_len", "max_num_seqs",
                    "client_concurrency"}
TOP_ALIASES = {"before": "baseline", "after": "current", "now": "current"}
RDMA_ONLY_SIGNALS = {"ib_write_bw_gbit_per_s", "ib_symbol_errors", "ib_link_downed", "ib_xmit_wait_rate",
                     "rdma_retransmits"}   # measured only on RDMA adapters
CONTEXT_KEYS = {
    "workload": str, "gpu": str, "nodes": int, "gpus_per_node": int, "model_params_b": (int, float),
    "engine": str, "slo": dict, "versions": dict, "model": (dict, str), "model_config": str, "tp": int, "pp": int,
    "dp": int, "description": str, "metric_definitions": dict, "window": str, "tokens_per_step": (int, float),
    "gpus_per_replica": int, "replicas": int, "gpu_memory_utilization": (int, float), "gpus": int,
    "world_size": int, "global_batch_size": int, "seq_len": int, "interconnect": str, "allreduce": dict,
    "tools": dict, "metric_sources": dict, "prometheus": dict, "disaggregated": bool, "gateway": (bool, str),
    "max_num_seqs": int, "client_concurrency": int, "rdma": bool, "rollouts": bool,
}


@dataclass
class Snapshot:
    """Observed evidence. Signal values are scalars or {entity: value} mappings."""
    source: str
    context: dict = field(default_factory=dict)
    changes: list[str] | None = None
    baseline: dict = field(default_factory=dict)
    current: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # readings computed from a tool output of the good state and one of the slow state (signal -> the note that
    # explains it); recomputed as more outputs arrive, and never over a value given another way
    derived: dict = field(default_factory=dict)


def load_snapshot(path: str | Path, kb: KB) -> Snapshot:
    """Read and validate a snapshot file; bad input raises InputError naming file and key."""
    shown = str(path)
    data = load_file(path, shown)
    if isinstance(data, dict) and "snapshot" in data and "expected" in data:  # a labeled case file
        data = data["snapshot"]
    snap = parse_snapshot(data, kb, shown)
    config = snap.context.get("model_config")
    if isinstance(config, str) and not Path(config).is_absolute():  # relative to the snapshot, wherever it goes
        snap.context["model_config"] = str((Path(path).parent / config).resolve())
    return snap


def parse_snapshot(data, kb: KB, where: str = "snapshot") -> Snapshot:
    """Validate a snapshot mapping. Unknown signals, changes and context keys become warnings."""
    if not isinstance(data, dict):
        raise InputError(where, "", "a snapshot must be a mapping with context, changes, baseline, current")
    snap = Snapshot(source=where)
    data = _normalize_top(data, kb, where, snap.warnings)
    for key in data:
        if key not in TOP_KEYS:
            snap.warnings.append(f"{where}: {key}: unknown top-level key, ignored (expected {', '.join(sorted(TOP_KEYS))})")
    snap.context = _context(data.get("context") or {}, kb, where, snap.warnings)
    snap.changes = _changes(data.get("changes", None), kb, where, snap.warnings)
    unknown = []
    for part in ("baseline", "current"):
        values = data.get(part) or {}
        if not isinstance(values, dict):
            raise InputError(where, part, "must be a mapping of signal -> value")
        read = {}
        for key, value in values.items():
            sid, value = _resolve_key(kb, str(key), value, where, part, snap.warnings)
            if sid in read:
                raise InputError(where, f"{part}.{key}", f"{sid} is given twice (once under another name)")
            if sid is None:
                unknown.append(f"{part}.{key}")
            elif (value := _signal_value(kb, sid, value, where, f"{part}.{key}", snap.warnings)) is not None:
                read[sid] = value
        setattr(snap, part, read)
    if not snap.current:
        shown = f" (unknown: {', '.join(unknown[:6])}{' ...' if len(unknown) > 6 else ''})" if unknown else ""
        raise InputError(where, "current", f"no known signal observed{shown}: nothing to diagnose; "
                                           "signal names are listed in kb/signals/*.yaml")
    if "rdma" not in snap.context and _rdma_measured(snap):
        snap.context["rdma"] = True
    return snap


def _rdma_measured(snap: Snapshot) -> bool:
    """An RDMA test or port counter was read, or NCCL reported NET/IB (InfiniBand or RoCE verbs), in either state:
    the nodes have RDMA adapters."""
    for values in (snap.baseline, snap.current):
        if RDMA_ONLY_SIGNALS & values.keys():
            return True
        transport = values.get("nccl_transport")
        names = transport.values() if isinstance(transport, dict) else [transport]
        if any(isinstance(n, str) and n.upper().startswith("NET/IB") for n in names):
            return True
    return False


def _normalize_top(data, kb, where, warnings):
    """Accept before/after (and now) for baseline/current, and bare signals at the top level as `current`."""
    data = dict(data)
    for alias, key in TOP_ALIASES.items():
        if alias in data and key not in data:
            data[key] = data.pop(alias)
    loose = [k for k in data if k not in TOP_KEYS and k in kb.signals]
    if loose and "current" not in data:
        data["current"] = {k: data.pop(k) for k in loose}
        warnings.append(f"{where}: {', '.join(loose)}: signals at the top level, read as current")
    return data


def _context(ctx, kb, where, warnings):
    if not isinstance(ctx, dict):
        raise InputError(where, "context", "must be a mapping")
    ctx = {CONTEXT_ALIASES.get(k, k): v for k, v in ctx.items()}
    for key, value in ctx.items():
        expected = CONTEXT_KEYS.get(key)
        if expected is None:
            warnings.append(f"{where}: context.{key}: unknown context key, kept as is")
        elif not isinstance(value, expected) or (isinstance(value, bool) and bool not in _types(expected)):
            raise InputError(where, f"context.{key}", f"expected {_type_name(expected)}, got {value!r}")
        elif _is_number(value):
            value = _finite(value, where, f"context.{key}")
            if key in POSITIVE_CONTEXT and value <= 0:
                raise InputError(where, f"context.{key}", f"must be positive, got {value:g}")
            if key == "gpu_memory_utilization" and not 0 < value <= 1:
                raise InputError(where, f"context.{key}", f"must be a fraction in (0, 1], got {value:g}")
    ctx = dict(ctx)
    if ctx.get("workload") in WORKLOAD_ALIASES:
        ctx["workload"] = WORKLOAD_ALIASES[ctx["workload"]]
    if ctx.get("workload") not in (None, "inference", "training"):
        raise InputError(where, "context.workload", f"must be 'inference' or 'training', got {ctx['workload']!r}")
    link = match_interconnect(str(ctx["interconnect"])) if ctx.get("interconnect") else None
    if link is not None and link.kind != "ethernet":   # an InfiniBand or RoCE link is an RDMA fabric
        if ctx.get("rdma") is False:
            raise InputError(where, "context.rdma", f"false, but context.interconnect {ctx['interconnect']!r} "
                                                    f"is {link.kind}, an RDMA link")
        ctx["rdma"] = True
    for sid, bound in (ctx.get("slo") or {}).items():
        if sid not in kb.signals:
            warnings.append(f"{where}: context.slo.{sid}: unknown signal, SLO ignored")
        elif not _is_number(bound) or not 0 < bound < math.inf:
            raise InputError(where, f"context.slo.{sid}", f"must be a positive number, got {bound!r}")
    return ctx


def _changes(changes, kb, where, warnings):
    if changes is None:
        return None
    if isinstance(changes, str):
        changes = [changes]
    if not isinstance(changes, list) or not all(isinstance(c, str) for c in changes):
        raise InputError(where, "changes", "must be a list of change names")
    known = []
    for c in changes:
        if c in kb.changes:
            known.append(c)
        else:
            close = difflib.get_close_matches(c, kb.changes, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(sorted(kb.changes))}"
            warnings.append(f"{where}: changes: unknown change '{c}' ignored ({hint})")
    return known


def _resolve_key(kb, key, value, where, part, warnings):
    """(signal id, value) for a key of baseline or current: a signal id, an exporter gauge the KB reads as one
    (vllm:num_requests_waiting, DCGM_FI_DEV_GPU_UTIL), or a signal's name in other units (ttft_p99_ms,
    gpu_util_pct), the value scaled to the signal's unit. (None, value) and a warning for an unknown key."""
    if key in kb.signals:
        return key, value
    resolved = _gauge_metric(kb, key) or _unit_suffix(kb, key)
    if resolved is None:
        close = difflib.get_close_matches(key, kb.signals, n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        warnings.append(f"{where}: {part}.{key}: unknown signal, ignored{hint}")
        return None, value
    sid, scale, how = resolved
    warnings.append(f"{where}: {part}.{key}: read as {sid} ({how})")
    scaled = {e: _scaled(v, scale) for e, v in value.items()} if isinstance(value, dict) else _scaled(value, scale)
    return sid, scaled


def _gauge_metric(kb, key):
    """The signal an exporter gauge of this name (with or without its engine prefix) is read as, with its scale;
    None if none or several."""
    found = {(sid, m.scale) for sid, s in kb.signals.items() for m in s.metrics
             if m.kind == "gauge" and key in (m.metric, m.metric.split(":", 1)[-1])}   # vllm:x or just x
    if len(found) != 1:
        return None
    (sid, scale), = found
    return sid, scale, f"the exporter metric{'' if scale == 1 else f', x{scale:g}'}"


UNIT_SUFFIXES = {"_ms": ("s", 1e-3), "_us": ("s", 1e-6), "_min": ("s", 60.0),
                 "_pct": ("fraction", 0.01), "_percent": ("fraction", 0.01)}


def _unit_suffix(kb, key):
    """ttft_p99_ms -> ttft_p99_s x0.001, gpu_util_pct -> gpu_util x0.01. Not vLLM's *_perc gauges: they are 0-1."""
    for suffix, (unit, scale) in UNIT_SUFFIXES.items():
        if key.endswith(suffix):
            stem = key[: -len(suffix)]
            sid = stem + "_s" if unit == "s" else stem
            signal = kb.signals.get(sid)
            if signal is not None and (signal.unit == unit or signal.kind == unit):
                return sid, scale, f"{suffix[1:]} -> {'s' if unit == 's' else '0-1'}"
    return None


def _scaled(value, scale):
    """A number, or a number written as text without a unit, times `scale`; anything else as it is."""
    if scale == 1:
        return value
    if isinstance(value, str) and (m := NUMBER_UNIT.fullmatch(value.strip())) and not m.group(3):
        value = float(m.group(1))
    return value * scale if _is_number(value) else value


def _signal_value(kb, sid, value, where, key, warnings):
    """Check one signal's value (scalar or per-entity mapping)."""
    signal = kb.signals[sid]
    if isinstance(value, dict):
        if not value:
            raise InputError(where, key, "empty per-entity mapping")
        return {str(entity): _scalar(signal, v, where, f"{key}.{entity}", warnings) for entity, v in value.items()}
    return _scalar(signal, value, where, key, warnings)


def _scalar(signal, value, where, key, warnings):
    kind = signal.kind
    if kind == "bool":
        if not isinstance(value, bool):
            raise InputError(where, key, f"expected true or false, got {value!r}")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise InputError(where, key, f"expected a string, got {value!r}")
        if signal.values and value not in signal.values:
            warnings.append(f"{where}: {key}: unusual value {value!r} (known: {', '.join(signal.values)})")
        return value
    if kind == "list":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(where, key, f"expected a list of strings, got {value!r}")
        for v in value:
            if signal.values and v not in signal.values:
                warnings.append(f"{where}: {key}: unknown value {v!r} (known: {', '.join(signal.values)})")
        return list(value)
    if isinstance(value, str):
        value = _number_with_unit(value.strip(), signal, where, key)
    if not _is_number(value):
        raise InputError(where, key, f"expected a number in {signal.unit}, got {value!r}")
    value = _finite(value, where, key)
    lo, hi = signal.range or (float("-inf"), float("inf"))
    if kind == "fraction" and hi <= 1.5 and hi < value <= hi * 1.05:
        warnings.append(f"{where}: {key}: {value:g} is just above {hi:g} (rounding or rate jitter); read as {hi:g}")
        value = hi
    elif kind == "fraction" and hi <= 1.5 and max(1.5, hi) < value <= 100:
        warnings.append(f"{where}: {key}: {value:g} looks like a percent; read as {value / 100:g} (fractions are 0-1)")
        value /= 100
    if not lo <= value <= hi:
        raise InputError(where, key, f"{value:g} is outside the valid range {lo:g}..{hi:g} {signal.unit}")
    return value


def _number_with_unit(text, signal, where, key):
    """'3.5e3' (YAML 1.1 reads it as text), '45%' for a fraction, '800ms' or '2.5 s' for seconds; else unchanged."""
    m = NUMBER_UNIT.fullmatch(text)
    if not m:
        return text
    number, unit = float(m.group(1)), (m.group(3) or "").strip()
    if not unit:
        return number
    if unit == "%" and signal.kind == "fraction":
        return number / 100
    if signal.unit == "s" and unit in SECONDS:
        return number * SECONDS[unit]
    if unit == signal.unit:
        return number
    raise InputError(where, key, f"unit '{unit}' does not fit this signal (expected {signal.unit})")


def _finite(value, where, key):
    """float(value), refusing numbers too large for a float and NaN or infinity."""
    try:
        value = float(value)
    except OverflowError:
        raise InputError(where, key, "number too large") from None
    if math.isnan(value) or math.isinf(value):
        raise InputError(where, key, f"{value} is not a finite number")
    return value


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _types(expected) -> tuple:
    return expected if isinstance(expected, tuple) else (expected,)


def _type_name(t):
    return " or ".join(x.__name__ for x in _types(t))


def snapshot_dict(snap: Snapshot) -> dict:
    """The snapshot as plain data, in file order, ready to be written and loaded again."""
    out = {"context": snap.context}
    if snap.changes is not None:
        out["changes"] = list(snap.changes)
    out["baseline"] = snap.baseline
    out["current"] = snap.current
    return out


def dump_snapshot(snap: Snapshot) -> str:
    import yaml

    class NoAliases(yaml.SafeDumper):   # a value shared by two keys is written out twice, not as &id001 / *id001
        def ignore_aliases(self, data):
            return True
    header = "".join(f"# warning: {w}\n" for w in snap.warnings)
    return header + yaml.dump(snapshot_dict(snap), Dumper=NoAliases, sort_keys=False, allow_unicode=True, width=120)
