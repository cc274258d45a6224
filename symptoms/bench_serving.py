"""Serving benchmark results: vLLM `benchmark_serving.py` / `vllm bench serve` and SGLang `bench_serving`.

Both print one block between "============ Serving Benchmark Result ============" and a line of "=":
request and token throughput, then TTFT, TPOT, ITL and end-to-end latency (mean, median, percentiles, ms).
vLLM before mid-2024 printed the same rows without the header and with the unit after the value
("Median TTFT: 96.76 ms"). The numbers are measured by the client, so they include the network and any
gateway in front. One run per file: a good run and a slow run are two files (`--baseline-artifact`, `--artifact`).
"""
import re

from .common import Artifact, fail

_HEADER = re.compile(r"=+ Serving Benchmark Result =+")
_CLOSE = re.compile(r"={10,}")
_ROW = re.compile(r"^([A-Za-z][\w ()/.\-]*?)\s*:\s+(\S.*?)$")
_VALUE = re.compile(r"^([-+]?\d[\d,]*(?:\.\d+)?|inf|not set|None)\s*(.*)$")
_OLD_UNITS = {"ms": "(ms)", "s": "(s)", "requests/s": "(req/s)", "tokens/s": "(tok/s)"}
_MS = 0.001
# row label -> (signal, scale); the first label found for a signal wins, so ITL comes before TPOT
_SIGNALS = [
    ("Median TTFT (ms)", "ttft_p50_s", _MS), ("P99 TTFT (ms)", "ttft_p99_s", _MS),
    ("Median ITL (ms)", "itl_p50_s", _MS), ("Median TPOT (ms)", "itl_p50_s", _MS),
    ("P99 ITL (ms)", "itl_p99_s", _MS), ("P99 TPOT (ms)", "itl_p99_s", _MS),
    ("Median E2EL (ms)", "e2e_p50_s", _MS), ("Median E2E Latency (ms)", "e2e_p50_s", _MS),
    ("P99 E2EL (ms)", "e2e_p99_s", _MS), ("P99 E2E Latency (ms)", "e2e_p99_s", _MS),
    ("Request throughput (req/s)", "request_rate_rps", 1.0),
    ("Output token throughput (tok/s)", "output_tokens_per_s", 1.0),
]
_CONTEXT = {"Maximum request concurrency": "client_concurrency", "Max request concurrency": "client_concurrency",
            "Request rate configured (RPS)": "request_rate_configured", "Traffic request rate": "request_rate_configured",
            "Backend": "backend", "Benchmark duration (s)": "duration_s", "Concurrency": "mean_concurrency"}


def _rows(text: str):
    """(line number, label, value text) for every "Label: value" line; a Markdown quote "> " is dropped and
    the old "Median TTFT: 96.76 ms" form is read as "Median TTFT (ms): 96.76"."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"^\s*>\s?", "", raw).strip()
        if _HEADER.search(line) or _CLOSE.fullmatch(line):
            out.append((n, line, None))
        elif m := _ROW.match(line):
            label, value = m[1], m[2]
            if "(" not in label and (old := re.fullmatch(r"(\S+)\s+(ms|s|requests/s|tokens/s)", value)):
                label, value = f"{label} {_OLD_UNITS[old[2]]}", old[1]
            out.append((n, label, value))
    return out


def detect(text: str) -> bool:
    head = text[:400000]
    if _HEADER.search(head):
        return True
    labels = {label for _, label, _ in _rows(head[:20000])}
    return "Successful requests" in labels and "Median TTFT (ms)" in labels


def parse(text: str, where: str) -> Artifact:
    rows = _rows(text)
    headers = [n for n, label, value in rows if value is None and _HEADER.search(label)]
    if len(headers) > 1:
        fail(where, headers[1], "header", f"{len(headers)} result blocks (lines {', '.join(map(str, headers))}): give "
             "each run as its own file, the slow one with --artifact and the good one with --baseline-artifact")
    notes = ["client-side figures: they include the network and any gateway in front of the engine"]
    start = headers[0] if headers else 0
    before = [(n, label) for n, label, value in rows if n < start and value is not None and label not in _CONTEXT]
    if before:
        notes.append(f"{len(before)} result rows above the header (lines {before[0][0]}-{before[-1][0]}) ignored: "
                     "another run's output?")
    block, closed = {}, False
    for n, label, value in rows:
        if value is None:
            closed = closed or (n > start and bool(_CLOSE.fullmatch(label)))
            continue
        if closed:
            continue
        if n > start or label in _CONTEXT:
            block.setdefault(label, (value, n))
    if not closed and headers:
        notes.append(f"the result block has no closing line of '=': output cut off after line {rows[-1][0]}; "
                     "rows after that are missing")
    signals = {}
    for label, sid, scale in _SIGNALS:
        if label in block and sid not in signals:
            signals[sid] = round(_number(block, label, where, notes) * scale, 6)
    if not signals:
        fail(where, rows[-1][0] if rows else 1, "Median TTFT (ms)", "no latency or throughput row in the result "
             "block: not a serving benchmark result, or cut off before its first figure")
    ok = _number(block, "Successful requests", where, notes) if "Successful requests" in block else None
    if ok == 0:
        fail(where, block["Successful requests"][1], "Successful requests", "no successful request: nothing was measured")
    for label, sid in (("Total input tokens", "prompt_tokens_mean"), ("Total generated tokens", "output_tokens_mean")):
        if ok and label in block:
            signals[sid] = round(_number(block, label, where, notes) / ok, 3)
    if "Failed requests" in block and (failed := _number(block, "Failed requests", where, notes)):
        notes.append(f"{failed:g} requests failed; the latencies cover the successful ones only")
    if "itl_p50_s" in signals and "Median ITL (ms)" not in block:
        notes.append("no ITL rows: itl_* read from TPOT (time per output token after the first)")
    ctx = _context(block)
    ctx["metric_definitions"] = {sid: f"the serving benchmark's '{label}' row, measured on the client (network and "
                                      "any gateway included)" for label, sid, _ in _SIGNALS
                                 if sid in signals and label in block and _first_label(sid, block) == label}
    if "request_rate_rps" in ctx["metric_definitions"]:
        ctx["metric_definitions"]["request_rate_rps"] += "; requests completed per second over the run, not arrivals"
    for sid, label in (("prompt_tokens_mean", "Total input tokens"), ("output_tokens_mean", "Total generated tokens")):
        if sid in signals:
            ctx["metric_definitions"][sid] = f"the serving benchmark's '{label}' over its successful requests"
    return Artifact("bench_serving", signals, ctx, notes)


def _first_label(sid: str, block: dict) -> str | None:
    """The row a signal was read from (ITL before TPOT)."""
    return next((label for label, s, _ in _SIGNALS if s == sid and label in block), None)


def _number(block: dict, label: str, where: str, notes: list) -> float:
    value, line = block[label]
    m = _VALUE.match(value)
    if not m or not m[1][0].isdigit() and m[1][0] not in "+-":
        fail(where, line, label, f"expected a number, got {value!r}")
    if m[2]:
        notes.append(f"line {line}: {m[2]!r} after the number ignored")
    return float(m[1].replace(",", ""))


def _context(block: dict) -> dict:
    """The run's settings: load-generator settings as numbers ("inf" and "not set" say there was no limit)."""
    ctx = {}
    for label, key in _CONTEXT.items():
        if label not in block or key in ctx:
            continue
        value = block[label][0].split()[0]
        if re.fullmatch(r"\d+", value):
            ctx[key] = int(value)
        elif re.fullmatch(r"\d*\.\d+", value):
            ctx[key] = float(value)
        elif key not in ("client_concurrency", "request_rate_configured"):
            ctx[key] = block[label][0]
    return ctx
