"""A saved /metrics page (`curl -s http://HOST:PORT/metrics > FILE`) of vLLM, SGLang, TGI, dcgm-exporter or
node_exporter: its gauges as readings, and what the exposition says about the deployment.

One page has no time axis: counters and histograms count since the process started, so rates and latency
quantiles (TTFT, ITL, throughput) need two scrapes (`--scrape URL`) or Prometheus. They are named in a note,
never estimated from lifetime totals that mix the healthy and the slow period.
"""
import re

from perfdoctor.kb.loader import load_kb
from perfdoctor.symptoms.common import Artifact, fail
from perfdoctor.symptoms.metrics import _index, from_scrapes
from perfdoctor.symptoms.prometheus import _checked, metric_signals
from perfdoctor.symptoms.scrape import parse_exposition

SAMPLE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?\s+\S+(\s+-?\d+)?$")
EXPORTERS = ("vllm:", "sglang:", "tgi_", "DCGM_", "node_")


def detect(text: str) -> bool:
    """An exposition: `# TYPE` lines, or sample lines of a known exporter."""
    lines = [ln for ln in text.splitlines()[:200] if ln.strip() and not ln.startswith("#")]
    if not lines or sum(bool(SAMPLE.match(ln)) for ln in lines) < 0.9 * len(lines):
        return False
    return "\n# TYPE " in "\n" + text or any(ln.startswith(EXPORTERS) for ln in lines)


def parse(text: str, path: str) -> Artifact:
    kb = load_kb()
    samples = parse_exposition(text, path)
    if not samples:
        fail(path, 1, "", "no samples in the exposition")
    index = _index(samples)
    art = Artifact(kind="metrics_dump")
    over_time = set()
    for signal in metric_signals(kb):
        for ms in signal.metrics:
            if ms.kind not in ("gauge", "ratio_of_gauges"):   # one page has no time axis for rates
                if any(name.startswith(ms.metric) for name in index):
                    over_time.add(signal.id)
                continue
            value = _checked(signal, from_scrapes(ms, {}, index, 1.0), art.notes, path, signal.id)
            if value is not None:
                art.signals[signal.id] = value
                art.context.setdefault("metric_sources", {})[signal.id] = ms.metric
                break
    over_time = ", ".join(sorted(over_time - art.signals.keys()))
    untimed = f"one page has no time axis, so {over_time} (rates and quantiles) cannot be read from it: scrape " \
              "twice (--scrape URL) or query Prometheus"
    _deployment(index, art)
    if not art.signals:
        fail(path, 1, "", untimed if over_time else "no metric perfdoctor reads (gauges of vLLM, SGLang, TGI, "
             "dcgm-exporter or node_exporter)")
    if over_time:
        art.notes.append(untimed)
    return art


def _deployment(index, art):
    """GPU model and driver from dcgm-exporter's labels; engine, prefix caching and KV pool from vLLM's cache_config_info."""
    for name, series in index.items():
        if name.startswith("DCGM_"):
            labels = series[0][0]
            if labels.get("modelName"):
                art.context.setdefault("gpu", labels["modelName"])
            if labels.get("DCGM_FI_DRIVER_VERSION"):
                art.context.setdefault("driver", labels["DCGM_FI_DRIVER_VERSION"])
        elif name.startswith("vllm:"):
            art.context.setdefault("engine", "vllm")
        elif name.startswith("sglang:"):
            art.context.setdefault("engine", "sglang")
    for labels, _ in index.get("vllm:cache_config_info", ())[:1]:
        if labels.get("enable_prefix_caching") in ("True", "False"):
            art.signals["prefix_caching"] = labels["enable_prefix_caching"] == "True"
        blocks, size = labels.get("num_gpu_blocks", ""), labels.get("block_size", "")
        if blocks.isdigit() and size.isdigit():
            art.signals["kv_cache_capacity_tokens"] = int(blocks) * int(size)
