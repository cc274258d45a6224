"""Gather evidence from every source the user names (snapshot file, tool outputs, Prometheus, scrapes) into one Snapshot."""
import re
from pathlib import Path

from perfdoctor.errors import InputError
from perfdoctor.kb.loader import KB
from perfdoctor.symptoms.snapshot import Snapshot, load_snapshot, parse_snapshot

ARTIFACT_SPEC = re.compile(r"^(?:(?P<host>[A-Za-z0-9_.\-]+):)?(?:(?P<kind>[a-z_]+)=)?(?P<path>.+)$")
VERSION_KEYS = ("driver", "cuda", "nccl", "vllm", "sglang")
CONTEXT_KEYS = ("gpu", "engine", "workload", "tp", "max_num_seqs", "client_concurrency",   # what a tool output says about the
                "metric_definitions")                                          # deployment and how it measured
OFFERED_LOAD = ("request_rate_configured", "client_concurrency")   # a load generator's settings, in order of preference


def parse_artifact_spec(spec: str) -> tuple[str | None, str | None, str]:
    """'[HOST:][KIND=]FILE' -> (host, kind, path). HOST prefixes entity names, e.g. node1/gpu3."""
    m = ARTIFACT_SPEC.match(spec)
    if not m or not m.group("path"):
        raise InputError("--artifact", spec, "expected [HOST:][KIND=]FILE")
    host, kind, path = m.group("host"), m.group("kind"), m.group("path")
    if host and not kind and Path(spec).exists():   # a path that merely contains ':'
        return None, None, spec
    return host, kind, path


def merge(kb: KB, base: Snapshot, other: Snapshot, label: str) -> Snapshot:
    """Add `other`'s signals and context to `base`. A value `base` already has wins, with a warning."""
    for part in ("current", "baseline"):
        mine, theirs = getattr(base, part), getattr(other, part)
        for sid, value in theirs.items():
            if sid not in mine:
                mine[sid] = value
            elif isinstance(mine[sid], dict) and isinstance(value, dict):
                clash = sorted(set(mine[sid]) & set(value))
                mine[sid] = {**value, **mine[sid]}
                if clash:
                    base.warnings.append(f"{label}: {part}.{sid}: {', '.join(clash[:5])} already given; kept the earlier values")
            else:
                base.warnings.append(f"{label}: {part}.{sid}: already given; kept the earlier value")
    for key, value in other.context.items():
        if key == "versions":
            base.context.setdefault("versions", {})
            for k, v in value.items():
                mine = base.context["versions"].setdefault(k, v)
                if str(mine) != str(v):
                    base.warnings.append(f"{label}: context.versions.{k}: says {v}, kept the earlier {mine}")
        elif isinstance(value, dict) and isinstance(base.context.get(key), dict):
            base.context[key] = {**value, **base.context[key]}
        else:
            mine = base.context.setdefault(key, value)
            if str(mine) != str(value):
                base.warnings.append(f"{label}: context.{key}: says {value}, kept the earlier {mine}")
    if base.changes is None:
        base.changes = other.changes
    base.warnings.extend(other.warnings)
    return base


def artifact_kind(spec: str) -> str | None:
    """The kind a spec names, or the one its content shows."""
    from perfdoctor.symptoms.artifacts import detect_kind, read_text
    _, kind, path = parse_artifact_spec(spec)
    return kind or detect_kind(read_text(path))


def artifact_snapshot(kb: KB, spec: str, part: str = "current", split=None) -> Snapshot:
    """One tool output as a Snapshot, its readings in `part` (current, or baseline for an output of the good
    state); values go through the same validation as a snapshot file. A baseline output adds no context."""
    from perfdoctor.symptoms.artifacts import load_artifact
    host, kind, path = parse_artifact_spec(spec)
    art = load_artifact(path, kind, split, part)
    prefix = f"{host}/" if host else ""
    readings = {sid: ({f"{prefix}{e}": v for e, v in value.items()} if isinstance(value, dict) else value)
                for sid, value in art.signals.items()}
    context = {"tools": {f"{prefix}{art.kind}": {k: v for k, v in art.context.items()}}}
    context.update({k: art.context[k] for k in CONTEXT_KEYS if k in art.context})
    versions = {k: str(art.context[k]) for k in VERSION_KEYS if art.context.get(k)}
    if versions:
        context["versions"] = versions
    if part == "baseline":
        context = {"tools": {f"baseline/{prefix}{art.kind}": dict(art.context)}}
    snap = parse_snapshot({"context": context, "current": readings}, kb, path) if readings else \
        Snapshot(source=path, context=context)
    if part == "baseline":
        snap.baseline, snap.current = snap.current, {}
    snap.warnings.extend(f"{path}: {note}" for note in art.notes)
    return snap


def add_artifact(kb: KB, base: Snapshot, spec: str, part: str = "current", split=None) -> Snapshot:
    """Merge one tool output into `base` (current, or baseline); two benchmark runs' load settings give the
    offered-load ratio unless it is already known."""
    merge(kb, base, artifact_snapshot(kb, spec, part, split), spec)
    tools = base.context.get("tools", {})
    if "offered_load_ratio" not in base.current and (ratio := _offered_load_ratio(tools)):
        base.current["offered_load_ratio"] = ratio
    _derive(base, "op_slowdown_spread", kernel_spread(tools))
    _derive(base, "op_backend_changed", _backend_changed(tools))
    return base


def _offered_load_ratio(tools: dict) -> float | None:
    """Slow over good load from two benchmark runs' settings (request rate, else concurrency), when both give it."""
    for key in OFFERED_LOAD:
        now = [c[key] for name, c in tools.items() if not name.startswith("baseline/") and key in c]
        before = [c[key] for name, c in tools.items() if name.startswith("baseline/") and key in c]
        if len(now) == len(before) == 1 and all(isinstance(v, (int, float)) and v > 0 for v in now + before):
            return now[0] / before[0]
    return None


def _derive(base: Snapshot, signal: str, result: tuple | None):
    """Set, update or withdraw a reading computed from two tool outputs; a value given another way wins."""
    if signal in base.current and signal not in base.derived:
        return
    if note := base.derived.pop(signal, None):
        base.current.pop(signal, None)
        base.warnings.remove(note)
    if result is not None:
        value, why = result
        base.derived[signal] = note = f"{signal} {str(value).lower()}: {why}"
        base.current[signal] = value
        base.warnings.append(note)


def _backend_changed(tools: dict) -> tuple[bool, str] | None:
    """True when the server logs of the good and the slow state name different attention backends."""
    before, now = ({c["attention_backend"] for name, c in tools.items() if "attention_backend" in c
                    and name.startswith("baseline/") is side} for side in (True, False))
    if len(before) == len(now) == 1 and before != now:
        return True, f"the server logs name the attention backend {before.pop()} before and {now.pop()} now"
    return None


def _mean_map(maps: list[dict]) -> dict:
    return {k: sum(m.get(k, 0.0) for m in maps) / len(maps) for m in maps for k in m}


def kernel_spread(tools: dict) -> tuple[str, str] | None:
    """few_ops or all_ops from the GPU time per step of each kernel in traces of the good and the slow state: a few
    kernels carrying most of the added time (a kernel, algorithm or setting changed), or every kernel slower by about
    the same factor (clocks, a fault, a neighbour). None when the kernels did not get slower or the growth is mixed."""
    sides = [[c["kernel_us_per_step"] for name, c in tools.items() if "kernel_us_per_step" in c
              and name.startswith("baseline/") is baseline] for baseline in (True, False)]
    if not all(sides):
        return None
    base, now = (_mean_map(side) for side in sides)
    total_before, total_now = sum(base.values()), sum(now.values())
    if total_before <= 0 or total_now < 1.05 * total_before:
        return None
    factor = total_now / total_before
    ratio = {k: now.get(k, 0.0) / v for k, v in base.items() if v > 0}
    alike = sum(base[k] for k, r in ratio.items() if r >= 1.05 and abs(r / factor - 1) <= 0.15)
    if alike >= 0.6 * total_before:
        return "all_ops", f"kernels holding {alike / total_before:.0%} of the good state's GPU time all slowed about x{factor:.2f}"
    added = total_now - total_before
    growers = [k for k in set(base) | set(now) if now.get(k, 0.0) > factor * base.get(k, 0.0)]
    grown = sum(now.get(k, 0.0) - base.get(k, 0.0) for k in growers)
    held = sum(base.get(k, 0.0) for k in growers)
    if grown >= 0.6 * added and held <= 0.5 * total_before:
        return "few_ops", (f"{len(growers)} kernels holding {held / total_before:.0%} of the good state's GPU time carry "
                           f"{grown / added:.0%} of the {added:,.0f} us added per step")
    return None


def gather(kb: KB, snapshot: Snapshot | str | None = None, artifacts: tuple = (), live: list[Snapshot] = (),
           baseline_artifacts: tuple = (), split=None) -> Snapshot:
    """The snapshot (file or loaded) first, then each artifact, then live sources; earlier values win.
    `baseline_artifacts` are outputs of the same tools from before the regression: their readings are the baseline.
    `split` (engine.log.split_time) cuts each server log in two: before it the baseline, from it on the current."""
    if snapshot is None and not artifacts and not live:
        raise InputError("perfdoctor", "", "no evidence: give a SNAPSHOT file, --artifact, --prometheus or --scrape")
    if isinstance(snapshot, str):
        snapshot = load_snapshot(snapshot, kb)
    base = snapshot or Snapshot(source="+".join([*artifacts, *(s.source for s in live)]) or "live")
    logs = [spec for spec in artifacts if split is not None and artifact_kind(spec) == "engine_log"]
    if split is not None and not logs:
        raise InputError("--split-at", "", "splits a vLLM or SGLang server log, and no --artifact is one")
    for spec in artifacts:
        if spec in logs:
            add_artifact(kb, base, spec, "baseline", split)
        add_artifact(kb, base, spec, split=split if spec in logs else None)
    for spec in baseline_artifacts:
        add_artifact(kb, base, spec, part="baseline")
    for snap in live:
        merge(kb, base, snap, snap.source)
    if not base.current:
        raise InputError(base.source, "current", "no known signal observed: nothing to diagnose")
    return base
