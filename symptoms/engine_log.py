"""Server logs of vLLM (V0 and V1) and SGLang -> queue, batch, KV-cache and prefix-cache readings.

Both engines print a status line every few seconds: vLLM "Avg prompt throughput: ... Running: N reqs,
Waiting (V0: Pending): M reqs, GPU KV cache usage: x%", one per engine ("Engine 000") in V1; SGLang a
"Decode batch. #running-req: ..., token usage: ..., #queue-req: ..." line per decode interval and a
"Prefill batch. #new-token: ..., #cached-token: ..." line per prefill. Readings are averaged over the
busy lines (something running or waiting): idle stretches would dilute the incident. Preemptions (vLLM's
"is preempted" warnings, SGLang's retractions) become a rate over the logged span. Startup lines give the
engine settings (prefix caching, chunked prefill, CUDA graphs, KV capacity) and context (version, TP, model).
"""
import re
from collections import defaultdict
from datetime import datetime

from .common import Artifact, fail, mean
from .nccl_tests import read_nccl_info

_PCT = r"([\d.]+)%"
_VLLM_STATS = re.compile(
    r"(?:Engine (\d+): )?Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
    r"Running: (\d+) reqs,(?: Swapped: (\d+) reqs,)? (?:Pending|Waiting): (\d+) reqs,? GPU KV cache usage: " + _PCT
    + r"(?:, CPU KV cache usage: [\d.]+%)?(?:, Prefix cache hit rate: " + _PCT + ")?")
_VLLM_V0_PREFIX = re.compile(r"Prefix cache hit rate: GPU: " + _PCT)
_VLLM_PREEMPT = re.compile(r"is preempted by (?:PreemptionMode\.)?\w+ mode because there is not enough KV cache space"
                           r".*?(?:total_num_cumulative_preemption=(\d+))?\s*$")
_SPEC_RATE = re.compile(r"[Dd]raft acceptance rate: ([\d.]+)(%?)")
_SG_DECODE = re.compile(r"Decode batch[.,] #running-req: (\d+), #token: (\d+), token usage: ([\d.]+),"
                        r"(?: .*?cuda graph: (True|False),)?.*?gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)")
_SG_PREFILL = re.compile(r"Prefill batch[.,] #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+),"
                         r".*?token usage: ([\d.]+), #running-req: (\d+), #queue-req: (\d+)")
_STATUS_WORDS = re.compile(r"Avg prompt throughput|Decode batch[.,]|Prefill batch[.,]")
_SG_RETRACT = re.compile(r"#retracted_reqs: (\d+)")
_DP_RANK = re.compile(r"\bDP(\d+)\b|EngineCore_(?:DP)?(\d+)")
# timestamps: vLLM "INFO 05-19 10:13:11", SGLang "[2024-07-20 05:52:32", ISO "2026-05-12T08:01:39"
_TS = [(re.compile(r"\b(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)"), lambda m: f"{m[1]} {m[2]}", "%Y-%m-%d %H:%M:%S"),
       (re.compile(r"\b(?:INFO|WARNING|DEBUG|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)"), lambda m: f"2000-{m[1]}", "%Y-%m-%d %H:%M:%S")]
_SETTINGS = [  # (pattern, key, value from the match)
    (re.compile(r"vLLM API server version:? v?(\S+?)[,\s]"), "vllm", lambda m: m[1]),
    (re.compile(r"Initializing an? (?:V\d )?LLM engine \(v([^)\s]+)\)"), "vllm", lambda m: m[1]),
    (re.compile(r"\bsglang(?:==| version:? )v?(\d+\.\d+\S*)"), "sglang", lambda m: m[1].rstrip(",")),
    (re.compile(r"\btensor_parallel_size=(\d+)"), "tp", lambda m: int(m[1])),
    (re.compile(r"\btp_size=(\d+)"), "tp", lambda m: int(m[1])),
    (re.compile(r"\bmax_num_seqs'?[=:] ?(\d+)"), "max_num_seqs", lambda m: int(m[1])),   # also the non-default args dict
    (re.compile(r"\bmax_running_requests[=:] ?(\d+)"), "max_num_seqs", lambda m: int(m[1])),
    (re.compile(r"\bmodel(?:_path)?='([^']+)'"), "model_name", lambda m: m[1]),
    # the language model's attention backend (not a vision encoder's "for vit attention" line): the launch flag,
    # then the selection line of vLLM V1 ("Using AttentionBackendEnum.X backend", "Using X attention backend out
    # of ..."), older vLLM ("Using Flash Attention backend", "Using XFormers backend") and SGLang's server args
    (re.compile(r"'attention_backend': '(\w+)'|\battention_backend='(\w+)'"), "attention_backend", lambda m: _backend(m[1] or m[2])),
    (re.compile(r"Using AttentionBackendEnum\.(\w+) backend\.|Using (\w+) attention backend out of"), "attention_backend",
     lambda m: _backend(m[1] or m[2])),
    (re.compile(r"Using ([A-Za-z][\w ]*?) backend(?: on V1 engine)?\.?\s*$"), "attention_backend", lambda m: _backend(m[1])),
]
# a hybrid model's recurrent state shares the KV pool: vLLM sizes attention pages to the mamba page
_MAMBA_STATE = re.compile(r"mamba page size|Mamba cache mode is set")
_FLAGS = [  # engine settings that are signals: (pattern, signal, value)
    (re.compile(r"\benable_prefix_caching[=:] ?(True|False)"), "prefix_caching", lambda m: m[1] == "True"),
    (re.compile(r"\bdisable_radix_cache=(True|False)"), "prefix_caching", lambda m: m[1] == "False"),
    (re.compile(r"\bchunked_prefill_enabled=(True|False)"), "chunked_prefill", lambda m: m[1] == "True"),
    (re.compile(r"Chunked prefill is enabled"), "chunked_prefill", lambda m: True),
    (re.compile(r"\bchunked_prefill_size=(-?\d+)"), "chunked_prefill", lambda m: int(m[1]) > 0),
    (re.compile(r"\benforce_eager[=:] ?(True|False)"), "cuda_graphs", lambda m: m[1] == "False"),
    (re.compile(r"\bdisable_cuda_graph=(True|False)"), "cuda_graphs", lambda m: m[1] == "False"),
    (re.compile(r"\bdisable_custom_all_reduce[=:] ?(True|False)"), "custom_allreduce", lambda m: m[1] == "False"),
]
# the engine refused its custom all-reduce at start-up (PCIe-only GPUs, no P2P): this wins over the flag
_CUSTOM_AR_REFUSED = re.compile(r"Custom allreduce is disabled")
_KV_TOKENS = [re.compile(r"GPU KV cache size: ([\d,]+) tokens"), re.compile(r"\bmax_total_num_tokens=(\d+)")]


def _backend(name: str) -> str:
    """One spelling per backend across versions: 'Flash Attention', 'FLASH_ATTN' -> flashattn."""
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    return {"flashattention": "flashattn"}.get(flat, flat)


def detect(text: str) -> bool:
    head = text[:400000]
    return bool(_VLLM_STATS.search(head) or _SG_DECODE.search(head) or _SG_PREFILL.search(head))


def _engine(line: str) -> str:
    """Data-parallel engine a line belongs to: SGLang "[... DP1 TP0]", vLLM "(EngineCore_DP1 pid=..)"; else 0."""
    m = _DP_RANK.search(line)
    return f"engine{int(m[1] or m[2])}" if m else "engine0"


def _time(line: str):
    for pattern, stamp, fmt in _TS:
        if m := pattern.search(line):
            try:
                return datetime.strptime(stamp(m), fmt)
            except ValueError:
                return None
    return None


def split_time(text: str, where: str = "--split-at"):
    """'HH:MM[:SS]', 'MM-DD HH:MM[:SS]' or 'YYYY-MM-DD HH:MM[:SS]' -> (year, month, day, time) with None for
    what it leaves out; the log's own first timestamp fills those in."""
    m = re.fullmatch(r"\s*(?:(?:(\d{4})-)?(\d\d)-(\d\d)[ T])?(\d\d?):(\d\d)(?::(\d\d))?\s*", text or "")
    if not m:
        from perfdoctor.errors import InputError
        raise InputError(where, text, "expected a time such as 14:05, 05-19 14:05 or 2025-05-19 14:05:30")
    year, month, day = (int(x) if x else None for x in m.groups()[:3])
    return year, month, day, (int(m[4]), int(m[5]), int(m[6] or 0))


def _at(split, first: datetime) -> datetime:
    """The split point on the log's clock (vLLM's short timestamps carry no year: year 2000 stands in)."""
    year, month, day, (h, mi, s) = split
    year = first.year if year is None or first.year == 2000 else year
    return datetime(year, month or first.month, day or first.day, h, mi, s)


def parse(text: str, where: str, split=None, part: str = "current") -> Artifact:
    """`split` (from split_time) keeps the status lines before it (part baseline) or from it on (current)."""
    if split is not None:
        first = next((s for line in text.splitlines() if _STATUS_WORDS.search(line) and (s := _time(line))), None)
        if first is None:
            fail(where, 1, "timestamp", "--split-at needs timestamped status lines, and this log has none")
        at = _at(split, first)
        keep = (lambda s: s is not None and s < at) if part == "baseline" else (lambda s: s is not None and s >= at)
        lines = text.splitlines()
        dropped = sum(1 for line in lines if _STATUS_WORDS.search(line) and not keep(_time(line)))
        text = "\n".join(line if not (_STATUS_WORDS.search(line) or _VLLM_PREEMPT.search(line)
                                       or _SG_RETRACT.search(line)) or keep(_time(line)) else "" for line in lines)
        side = "before" if part == "baseline" else "from"
        if not any(_STATUS_WORDS.search(line) for line in text.splitlines()):
            fail(where, len(lines), "--split-at", f"no status line {side} {at:%m-%d %H:%M:%S}: the split is outside the log")
        note = f"{part}: the status lines {side} {at:%m-%d %H:%M:%S} ({dropped} others left out)"
        art = parse(text, where)
        art.notes.insert(0, note)
        return art
    rows = defaultdict(list)          # engine -> [{running, waiting, kv, gen, prompt, hit}]
    prefill = defaultdict(lambda: [0, 0])   # engine -> [new tokens, cached tokens]
    graphs, retracted, preempt_lines, preempt_total, spec, sglang = [], 0, 0, [], [], False
    times, ctx, flags, kv_tokens, notes = [], {}, {}, {}, []
    n = 0
    for n, line in enumerate(text.splitlines(), 1):
        stamp = _time(line)
        if m := _VLLM_STATS.search(line):
            engine = f"engine{int(m[1])}" if m[1] else "engine0"
            rows[engine].append({"running": int(m[4]), "waiting": int(m[6]), "kv": float(m[7]) / 100,
                                 "gen": float(m[3]), "prompt": float(m[2]), "hit": float(m[8]) / 100 if m[8] else None})
            if m[5] and int(m[5]):
                notes.append(f"line {n}: {m[5]} requests swapped out to CPU")
        elif m := _SG_DECODE.search(line):
            sglang = True
            engine = _engine(line)
            rows[engine].append({"running": int(m[1]), "waiting": int(m[6]), "kv": float(m[3]),
                                 "gen": float(m[5]), "prompt": None, "hit": None})
            if m[4]:
                graphs.append(m[4] == "True")
        elif m := _SG_PREFILL.search(line):
            sglang = True
            engine = _engine(line)
            prefill[engine][0] += int(m[2])
            prefill[engine][1] += int(m[3])
            rows[engine].append({"running": int(m[5]), "waiting": int(m[6]), "kv": float(m[4]), "gen": None,
                                 "prompt": None, "hit": None})
        elif m := _VLLM_V0_PREFIX.search(line):
            if rows.get("engine0") and rows["engine0"][-1]["hit"] is None:
                rows["engine0"][-1]["hit"] = float(m[1]) / 100
        elif m := _VLLM_PREEMPT.search(line):
            preempt_lines += 1
            if m[1]:
                preempt_total.append(int(m[1]))
        elif m := _SG_RETRACT.search(line):
            retracted += int(m[1])
        else:
            if _STATUS_WORDS.search(line):
                notes.append(f"line {n}: status line not understood (cut off, or a format this parser does not know): "
                             "skipped")
            if m := _SPEC_RATE.search(line):
                rate = float(m[1]) / (100 if m[2] else 1)
                if 0 <= rate <= 1:
                    spec.append(rate)
            for pattern, key, value in _SETTINGS:
                if key not in ctx and (s := pattern.search(line)):
                    ctx[key] = value(s)
            for pattern, key, value in _FLAGS:
                if s := pattern.search(line):
                    flags.setdefault(key, value(s))
            if _CUSTOM_AR_REFUSED.search(line):
                flags["custom_allreduce"] = False
            if _MAMBA_STATE.search(line):
                flags["hybrid_kv_cache"] = ["mamba_state"]
            for pattern in _KV_TOKENS:
                if s := pattern.search(line):
                    kv_tokens[_engine(line)] = int(s[1].replace(",", ""))
            continue
        if stamp:
            times.append(stamp)
    if rows:
        ctx["engine"] = "sglang" if sglang else "vllm"
        ctx["workload"] = "inference"
        ctx["metric_definitions"] = {sid: f"mean over the {ctx['engine']} log's busy status lines"
                                     for sid in ("requests_running", "requests_waiting", "kv_cache_usage",
                                                 "output_tokens_per_s")}
    else:
        fail(where, n or 1, "status line", "no vLLM 'Avg prompt throughput ... Running' or SGLang 'Decode batch' "
             "status lines: not an engine log?")
    signals = _signals(rows, prefill, graphs, flags, kv_tokens, spec, notes)
    read_nccl_info(text.splitlines(), signals, ctx, notes)   # NCCL_DEBUG=INFO lines of the TP workers
    return Artifact("engine_log", signals | _preemption(preempt_lines, preempt_total, retracted, sglang, times, notes),
                    ctx, notes)


def _signals(rows, prefill, graphs, flags, kv_tokens, spec, notes) -> dict:
    running, waiting, kv, gen, prompt, hit = {}, {}, {}, {}, {}, {}
    for engine, lines in sorted(rows.items()):
        busy = [r for r in lines if r["running"] or r["waiting"]]
        if not busy:
            notes.append(f"{engine}: all {len(lines)} status lines idle (nothing running or waiting)")
            busy = lines
        elif len(busy) < len(lines):
            notes.append(f"{engine}: averaged over the {len(busy)} busy status lines of {len(lines)}")
        running[engine] = mean(r["running"] for r in busy)
        waiting[engine] = mean(r["waiting"] for r in busy)
        kv[engine] = mean(r["kv"] for r in busy)
        if (rate := mean(r["gen"] for r in busy if r["gen"] is not None)) is not None:
            gen[engine] = rate
        if (rate := mean(r["prompt"] for r in busy if r["prompt"] is not None)) is not None:
            prompt[engine] = rate
        peak = max(r["kv"] for r in busy)
        if peak >= 0.9:
            notes.append(f"{engine}: KV cache usage peaked at {peak:.0%}")
        hits = [r["hit"] for r in busy if r["hit"] is not None]
        if hits:
            hit[engine] = mean(hits)
    for engine, (new, cached) in sorted(prefill.items()):
        if new + cached:
            hit[engine] = cached / (new + cached)
    signals = {"requests_running": running, "requests_waiting": waiting, "kv_cache_usage": kv}
    if gen:
        signals["output_tokens_per_s"] = gen
    if prompt:
        signals["prompt_tokens_per_s"] = prompt
    if hit:
        signals["prefix_cache_hit_rate"] = hit
    if spec:
        signals["spec_decode_acceptance_rate"] = {"engine0": mean(spec)}
    if kv_tokens:
        signals["kv_cache_capacity_tokens"] = kv_tokens
    if graphs:   # the state in force wins over the start-up flag: a batch above the captured sizes runs eagerly
        flags["cuda_graphs"] = sum(graphs) * 2 >= len(graphs)
        if sum(graphs) < len(graphs):
            notes.append(f"{len(graphs) - sum(graphs)} of {len(graphs)} decode batches ran without CUDA graphs")
    return signals | flags


def _preemption(lines: int, totals: list, retracted: int, sglang: bool, times: list, notes: list) -> dict:
    """Preemptions per second over the logged span. SGLang logs every retraction, so none logged is a zero;
    vLLM V0 warns only on every 50th preemption and V1 not at all, so there silence is no reading."""
    count = (max(totals) - min(totals) + 1) if totals else lines
    count += retracted
    if not count and not sglang:
        return {}
    if not times or (max(times) - min(times)).total_seconds() <= 0:
        if count:
            notes.append(f"{count} preemptions, but no timestamps to turn them into a rate")
        return {}
    span = (max(times) - min(times)).total_seconds()
    if count:
        bound = "" if sglang else "at least "   # vLLM V0 warns on the 1st, 51st, 101st ... preemption
        notes.append(f"{bound}{count} preemptions (KV cache full) in {span:.0f} s of log")
    return {"preemptions_per_s": {"engine0": count / span}}
