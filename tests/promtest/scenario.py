"""Turn a labeled scenario's snapshot into exporter series that a Prometheus query reads back as the same values.

For every numeric signal the scenario gives, the first metric source in the KB is served: gauges as
constants, counters growing at the stated rate, histograms whose bucket CDF passes exactly through the
stated quantiles (so histogram_quantile's linear interpolation returns them). All series carry a
`scenario` label so several scenarios can share one exporter and one Prometheus.
"""
from collections import defaultdict, namedtuple

from perfdoctor.symptoms.metrics import _index, from_scrapes, entity_id
from perfdoctor.symptoms.prometheus import metric_signals

Sample = namedtuple("Sample", "name labels value")
EPOCH = 1.0e9  # counters count from here, so they are large and positive at any test time
CPU_BUSY = "user|nice|system|irq|softirq|steal"


class ScenarioSeries:
    """The series of one scenario for the `baseline` and `current` periods."""

    def __init__(self, kb, name: str, snapshot: dict):
        self.kb, self.name, self.snapshot = kb, name, snapshot
        self.served = {}   # signal -> MetricSource
        self.shape = {"baseline": {}, "current": {}}  # signal -> value as served (entities renamed)
        self.plan = {"baseline": [], "current": []}   # (kind, metric, labels, params)
        for period in ("baseline", "current"):
            self._plan(period)

    # ------------------------------------------------------------ planning

    def _plan(self, period):
        values = self.snapshot.get(period) or {}
        by_metric = defaultdict(list)
        for signal in metric_signals(self.kb):
            if signal.id in (self.snapshot.get("current") or {}) and signal.id in values:
                ms = signal.metrics[0]
                self.served[signal.id] = ms
                by_metric[ms.metric].append((signal, ms, values[signal.id]))
        for metric, items in by_metric.items():
            entities = sorted({e for _, _, v in items if isinstance(v, dict) for e in v})
            for signal, ms, v in items:
                per = {e: (v[e] if isinstance(v, dict) else v) for e in entities} if entities else {None: v}
                labels = {e: self._labels(ms, e) for e in per}
                self.shape[period][signal.id] = {entity_id(ms, labels[e]): x for e, x in per.items()} \
                    if entities else v
            self._plan_metric(period, items, entities)

    def _labels(self, ms, entity):
        """{Hostname: node2, gpu: 5} from 'node2/gpu5'; missing leading parts get 'n0'."""
        out = {"scenario": self.name}
        if entity is None:
            return out
        parts = entity.split("/")
        names = ms.entity_labels[-len(parts):] if len(parts) <= len(ms.entity_labels) else ms.entity_labels
        for label in ms.entity_labels[:len(ms.entity_labels) - len(names)]:
            out[label] = "n0"
        for label, part in zip(names, parts[-len(names):]):
            prefix = label.lower()
            out[label] = part[len(prefix):] if part.startswith(prefix) and part[len(prefix):].isdigit() else part
        return out

    def _plan_metric(self, period, items, entities):
        plan = self.plan[period]
        ms0 = items[0][1]
        keys = entities or [None]
        val = lambda v, e: v[e] if isinstance(v, dict) else v
        if ms0.metric == "node_cpu_seconds_total":
            want = {next(iter(ms.labels.values())): (signal.id, v) for signal, ms, v in items}
            for e in keys:
                lab = self._labels(ms0, e)
                iow = val(want.get("iowait", (0, 0.0))[1], e)
                steal = val(want.get("steal", (0, 0.0))[1], e)
                busy = val(want.get(CPU_BUSY, (0, min(1.0, steal + 0.3)))[1], e)
                modes = {"iowait": iow, "steal": steal, "user": max(0.0, busy - steal), "idle": max(0.0, 1 - busy - iow)}
                for mode, share in modes.items():
                    plan.append(("counter", ms0.metric, {**lab, "cpu": "0", "mode": mode}, share))
            return
        for signal, ms, v in items:
            for e in keys:
                lab, x = self._labels(ms, e), val(v, e) / ms.scale
                if ms.kind == "gauge":
                    plan.append(("gauge", ms.metric, lab, x))
                elif ms.kind == "ratio_of_gauges":
                    plan += [("gauge", ms.metric, lab, 100 * x), ("gauge", ms.denominator, lab, 100.0)]
                elif ms.kind == "rate":
                    plan.append(("counter", ms.metric, lab, x))
                elif ms.kind == "ratio_of_rates":
                    plan += [("counter", ms.metric, lab, 100 * x), ("counter", ms.denominator, lab, 100.0)]
                elif ms.kind == "mode_share":
                    k, sel = next(iter(ms.labels.items()))
                    plan += [("counter", ms.metric, {**lab, k: sel}, x), ("counter", ms.metric, {**lab, k: "other"}, 1 - x)]
                elif ms.kind == "histogram_mean":
                    plan.append(("histogram", ms.metric, lab, {"knots": [], "mean": x}))
        hist = [(s, ms, v) for s, ms, v in items if ms.kind == "histogram_quantile"]
        for e in (keys if hist else []):
            knots = sorted((ms.quantile, val(v, e) / ms.scale) for s, ms, v in hist)
            if knots[0][0] > 0.5:  # only a tail given: put the median at half of it
                knots.insert(0, (0.5, knots[0][1] / 2))
            plan.append(("histogram", ms0.metric, self._labels(ms0, e), {"knots": knots, "mean": None}))

    # ------------------------------------------------------------ samples

    def samples(self, t: float, period: str, bounds: dict) -> list:
        """Every sample of `period` at Unix time `t`; counters grow from EPOCH."""
        out, age = [], t - EPOCH
        for kind, metric, labels, p in self.plan[period]:
            if kind == "gauge":
                out.append(Sample(metric, labels, p))
            elif kind == "counter":
                out.append(Sample(metric, labels, p * age))
            else:
                out += _histogram(metric, labels, p, bounds.get(metric, []), age)
        return out

    def bounds(self) -> dict:
        """Bucket bounds per histogram metric: every stated quantile value of both periods."""
        out = defaultdict(set)
        for period in self.plan:
            for kind, metric, _, p in self.plan[period]:
                if kind == "histogram":
                    out[metric].update(v for _, v in p["knots"])
        return {m: sorted(b) for m, b in out.items()}

    def implied(self, period: str) -> dict:
        """Signal values the served series imply (also for signals the scenario does not state)."""
        b = self.bounds()
        t = EPOCH + 7200.0
        first, second = _index(self.samples(t, period, b)), _index(self.samples(t + 30, period, b))
        out = {}
        for signal in metric_signals(self.kb):
            for ms in signal.metrics:
                v = from_scrapes(ms, first, second, 30.0)
                if v is not None:
                    out[signal.id] = v
                    break
        return out

    def equivalent_snapshot(self) -> dict:
        """The scenario as served: stated values (renamed entities) plus values the series imply."""
        out = {"context": dict(self.snapshot.get("context") or {})}
        for period in ("baseline", "current"):
            values = dict(self.implied(period))
            values.update(self.shape[period])
            out[period] = values
        return out


def _histogram(metric, labels, p, bounds, age):
    rate = 10.0
    count = rate * age
    if p["mean"] is not None:
        return [Sample(metric + "_bucket", {**labels, "le": "+Inf"}, count),
                Sample(metric + "_count", labels, count), Sample(metric + "_sum", labels, p["mean"] * count)]
    knots = [(0.0, 0.0)] + [(v, q) for q, v in p["knots"]]
    out = [Sample(metric + "_bucket", {**labels, "le": f"{b:g}"}, count * _cdf(knots, b)) for b in bounds]
    out += [Sample(metric + "_bucket", {**labels, "le": "+Inf"}, count),
            Sample(metric + "_count", labels, count), Sample(metric + "_sum", labels, count * knots[-1][0] / 2)]
    return out


def _cdf(knots, x):
    """Piecewise-linear CDF through (value, quantile) knots, flat after the last one."""
    for (x0, q0), (x1, q1) in zip(knots, knots[1:]):
        if x <= x1:
            return q0 + (q1 - q0) * (x - x0) / (x1 - x0) if x1 > x0 else q1
    return knots[-1][1]


def exposition(samples: list, timestamp: float | None = None) -> str:
    """Samples as text exposition (untyped families); with `timestamp`, OpenMetrics lines without # EOF."""
    by_name = defaultdict(list)
    for s in samples:
        by_name[s.name].append(s)
    lines = []
    for name, group in by_name.items():
        lines.append(f"# TYPE {name} unknown" if timestamp is not None else f"# TYPE {name} untyped")
        for s in group:
            lab = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            lines.append(f"{name}{{{lab}}} {s.value!r}" + (f" {timestamp:.3f}" if timestamp is not None else ""))
    return "\n".join(lines) + "\n"


def openmetrics_file(scenarios: list, start: float, end: float, step: float = 15.0) -> str:
    """Baseline samples of all scenarios from `start` to `end` every `step` s, one family at a time."""
    times = [start + i * step for i in range(int((end - start) // step) + 1)]
    per_name = defaultdict(list)
    for sc in scenarios:
        b = sc.bounds()
        for t in times:
            for s in sc.samples(t, "baseline", b):
                per_name[s.name].append((s, t))
    lines = []
    for name, group in per_name.items():
        lines.append(f"# TYPE {name} unknown")
        group.sort(key=lambda st: (sorted(st[0].labels.items()), st[1]))
        for s, t in group:
            lab = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            lines.append(f"{name}{{{lab}}} {s.value!r} {t:.3f}")
    return "\n".join(lines) + "\n# EOF\n"
