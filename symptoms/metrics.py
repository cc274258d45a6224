"""From a KB MetricSource to numbers: the PromQL for Prometheus, and the same arithmetic on two scrapes.

One query per MetricSource returns a vector grouped by the entity labels; an entity id is the entity
label values joined by "/" (a numeric value gets its label name in front: gpu="3" -> "gpu3"), so
dcgm-exporter series read "node1/gpu3". A result with one series and no entity labels is a scalar.
"""
import math
import re
from collections import defaultdict

import numpy as np

from perfdoctor.kb.schema import MetricSource

# Label spellings that changed between exporter releases (metrics.md §3.1): grouped by, read as one.
LABEL_ALIASES = {"Hostname": ["hostname"], "UUID": ["uuid"], "modelName": ["model_name"]}


def names(metric: str) -> list[str]:
    """Exposed names to accept: `vllm:x` is also seen as `vllm_x` after some pipelines (metrics.md §0)."""
    alt = metric.replace(":", "_")
    return [metric] if alt == metric else [metric, alt]


def group_labels(ms: MetricSource) -> list[str]:
    """Labels to group by: the entity labels plus their alternative spellings."""
    out = []
    for label in ms.entity_labels:
        out += [label] + LABEL_ALIASES.get(label, [])
    return out


# ---------------------------------------------------------------- PromQL

def _matchers(metric: str, labels: dict, selector: str) -> str:
    alts = names(metric)
    parts = [f'__name__=~"{"|".join(alts)}"'] if len(alts) > 1 else []
    for k, v in labels.items():
        parts.append(f'{k}=~"{v}"' if "|" in v else f'{k}="{v}"')
    sel = selector.strip().strip("{}").strip()
    if sel:
        parts.append(sel)
    body = "{" + ",".join(parts) + "}" if parts else ""
    return body if len(alts) > 1 else metric + body


def _range(metric, labels, selector, window, offset):
    return f"{_matchers(metric, labels, selector)}[{window}]" + (f" offset {offset}" if offset else "")


def _sum_rate(metric, labels, selector, window, offset, by):
    return f"sum by ({by}) (rate({_range(metric, labels, selector, window, offset)}))"


def promql(ms: MetricSource, window: str, offset: str | None = None, selector: str = "") -> str:
    """The instant query for `ms` over `window` (ending `offset` ago when given)."""
    by = ", ".join(group_labels(ms))
    m, lab = ms.metric, dict(ms.labels)
    if ms.kind == "gauge":
        expr = f"avg by ({by}) (avg_over_time({_range(m, lab, selector, window, offset)}))"
    elif ms.kind == "ratio_of_gauges":
        expr = f"avg by ({by}) (avg_over_time({_range(m, lab, selector, window, offset)})) / " \
               f"avg by ({by}) (avg_over_time({_range(ms.denominator, lab, selector, window, offset)}))"
    elif ms.kind == "rate":
        expr = _sum_rate(m, lab, selector, window, offset, by)
    elif ms.kind == "histogram_quantile":
        inner = _sum_rate(m + "_bucket", lab, selector, window, offset, ", ".join(["le"] + group_labels(ms)))
        expr = f"histogram_quantile({ms.quantile:g}, {inner})"
    elif ms.kind == "histogram_mean":
        expr = f"{_sum_rate(m + '_sum', lab, selector, window, offset, by)} / " \
               f"{_sum_rate(m + '_count', lab, selector, window, offset, by)}"
    elif ms.kind == "ratio_of_rates":
        expr = f"{_sum_rate(m, lab, selector, window, offset, by)} / " \
               f"{_sum_rate(ms.denominator, lab, selector, window, offset, by)}"
    elif ms.kind == "mode_share":
        expr = f"{_sum_rate(m, lab, selector, window, offset, by)} / " \
               f"{_sum_rate(m, {}, selector, window, offset, by)}"
    else:
        raise ValueError(f"unknown metric kind {ms.kind}")
    return f"({expr}) * {ms.scale:g}" if ms.scale != 1 else expr


# ---------------------------------------------------------------- entities

def entity_namer(ms: MetricSource):
    """A fast labels -> entity id function for `ms` (see entity_id)."""
    keys = [(label.lower(), [label] + LABEL_ALIASES.get(label, [])) for label in ms.entity_labels]

    def name(labels: dict) -> str:
        parts = []
        for prefix, alts in keys:
            value = ""
            for a in alts:
                value = labels.get(a, "")
                if value:
                    break
            if value:
                parts.append(prefix + value if value.isdigit() else value)
        return "/".join(parts)
    return name


def entity_id(ms: MetricSource, labels: dict) -> str:
    """'node1/gpu3' from {Hostname: node1, gpu: 3}; empty when no entity label is set."""
    return entity_namer(ms)(labels)


def to_signal_value(ms: MetricSource, pairs):
    """(labels, value) pairs -> scalar, {entity: value} or None; NaN and infinite values are dropped."""
    name = entity_namer(ms)
    return _collapse({name(labels): value for labels, value in pairs if value is not None and math.isfinite(value)})


def _collapse(out: dict):
    if not out:
        return None
    if len(out) == 1 and "" in out:
        return out[""]
    out.pop("", None)
    return out


def parse_vector(ms: MetricSource, result: list) -> object:
    """A Prometheus API vector result (`data.result`) -> scalar, {entity: value} or None."""
    if not result:
        return None
    name, out = entity_namer(ms), {}
    for r in result:
        v = float(r["value"][1])  # strings like "NaN", "+Inf" parse too
        if v - v == 0.0:  # finite
            out[name(r.get("metric", {}))] = v
    return _collapse(out)


# ---------------------------------------------------------------- two scrapes

def _index(samples):
    """{sample name: [(labels, value)]} for a list of prometheus_client Samples."""
    out = defaultdict(list)
    for s in samples:
        out[s.name].append((s.labels, s.value))
    return out


def _select(index, metric, labels):
    want = {k: re.compile(v) for k, v in labels.items()}
    for name in names(metric):
        for lab, value in index.get(name, ()):
            if all(p.fullmatch(lab.get(k, "")) for k, p in want.items()):
                yield lab, value


def _key(labels):
    return tuple(sorted(labels.items()))


def _deltas(first, second, metric, labels, dt):
    """Per-series per-second increase between two scrapes (a counter reset counts from 0)."""
    before = {_key(lab): v for lab, v in _select(first, metric, labels)}
    out = []
    for lab, v in _select(second, metric, labels):
        k = _key(lab)
        if k in before:
            d = v - before[k]
            out.append((lab, (v if d < 0 else d) / dt))
    return out


def _sum_by(ms, pairs, extra=()):
    """Sum values by (entity id, *extra labels)."""
    out, name = defaultdict(float), entity_namer(ms)
    for lab, v in pairs:
        out[(name(lab),) + tuple(lab.get(e, "") for e in extra)] += v
    return out


def bucket_quantile(q: float, bounds, counts) -> float:
    """Prometheus' histogram_quantile on cumulative bucket counts (linear inside a bucket)."""
    order = np.argsort(bounds)
    b, c = np.asarray(bounds, float)[order], np.maximum.accumulate(np.asarray(counts, float)[order])
    if len(b) < 2 or not math.isinf(b[-1]) or c[-1] <= 0:
        return math.nan
    rank = q * c[-1]
    i = int(np.searchsorted(c[:-1], rank, side="left"))
    if i == len(b) - 1:
        return float(b[-2])
    if i == 0 and b[0] <= 0:
        return float(b[0])
    start, count, below = (0.0, c[0], 0.0) if i == 0 else (b[i - 1], c[i] - c[i - 1], c[i - 1])
    return float(start + (b[i] - start) * (rank - below) / count) if count > 0 else float(b[i])


def _ratio(num, den):
    return [({"__e": e[0]}, num[e] / den[e] if den.get(e) else math.nan) for e in num]


def from_scrapes(ms: MetricSource, first: dict, second: dict, dt: float):
    """The value `ms` describes from two scrape indexes `dt` seconds apart (None when absent)."""
    m, lab = ms.metric, dict(ms.labels)
    if ms.kind == "gauge":
        pairs = [({"__e": e}, v) for e, v in _gauge_means(ms, first, second, m, lab).items()]
    elif ms.kind == "ratio_of_gauges":
        num, den = _gauge_means(ms, first, second, m, lab), _gauge_means(ms, first, second, ms.denominator, lab)
        pairs = [({"__e": e}, v / den[e] if den.get(e) else math.nan) for e, v in num.items()]
    elif ms.kind == "rate":
        pairs = [({"__e": e[0]}, v) for e, v in _sum_by(ms, _deltas(first, second, m, lab, dt)).items()]
    elif ms.kind == "histogram_quantile":
        sums = _sum_by(ms, _deltas(first, second, m + "_bucket", lab, dt), extra=("le",))
        per = defaultdict(lambda: ([], []))
        for (e, le), v in sums.items():
            per[e][0].append(float(le))
            per[e][1].append(v)
        pairs = [({"__e": e}, bucket_quantile(ms.quantile, b, c)) for e, (b, c) in per.items()]
    elif ms.kind in ("histogram_mean", "ratio_of_rates", "mode_share"):
        num_m, den_m, den_lab = {"histogram_mean": (m + "_sum", m + "_count", lab),
                                 "ratio_of_rates": (m, ms.denominator, lab),
                                 "mode_share": (m, m, {})}[ms.kind]
        num = _sum_by(ms, _deltas(first, second, num_m, lab, dt))
        den = _sum_by(ms, _deltas(first, second, den_m, den_lab, dt))
        pairs = _ratio(num, den)
    else:
        raise ValueError(f"unknown metric kind {ms.kind}")
    value = _by_entity_key(pairs)
    if value is None:
        return None
    if isinstance(value, dict):
        return {e: v * ms.scale for e, v in value.items()}
    return value * ms.scale


def _gauge_means(ms, first, second, metric, labels) -> dict:
    """Per entity, the mean of a gauge's samples over both scrapes."""
    groups, name = defaultdict(list), entity_namer(ms)
    for lab, v in list(_select(first, metric, labels)) + list(_select(second, metric, labels)):
        groups[name(lab)].append(v)
    return {e: float(np.mean(v)) for e, v in groups.items()}


def _by_entity_key(pairs):
    return _collapse({lab["__e"]: v for lab, v in pairs if v is not None and math.isfinite(v)})
