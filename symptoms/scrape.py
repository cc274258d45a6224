"""Live evidence without Prometheus: scrape each /metrics endpoint twice and compute from the deltas.

A scrape has no history, so the snapshot has no baseline. Each endpoint's samples get an `instance`
label (host:port, as Prometheus would set it) unless they carry one.
"""
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import requests
from prometheus_client.parser import text_string_to_metric_families

from perfdoctor.errors import InputError
from perfdoctor.kb.loader import KB
from perfdoctor.symptoms.metrics import _index, from_scrapes
from perfdoctor.symptoms.prometheus import _checked, metric_signals, safe_url
from perfdoctor.symptoms.snapshot import Snapshot


def scrape_snapshot(kb: KB, urls: list[str], interval_s: float = 15.0, timeout: float = 10.0) -> Snapshot:
    """Scrape `urls` twice, `interval_s` apart, and build a snapshot (current only)."""
    t0 = time.monotonic()
    first, errors = _fetch_all(urls, timeout)
    time.sleep(max(0.0, interval_s - (time.monotonic() - t0)))
    t1 = time.monotonic()
    second, errors2 = _fetch_all([u for u in urls if u in first], timeout)
    dt = t1 - t0
    errors.update(errors2)
    if not second:
        raise InputError(", ".join(safe_url(u) for u in urls), "", "no endpoint answered twice: " +
                         "; ".join(f"{safe_url(u)}: {e}" for u, e in errors.items()))
    snap = snapshot_from_texts(kb, {u: first[u] for u in second}, second, dt)
    snap.warnings += [f"{safe_url(u)}: not scraped: {e}" for u, e in errors.items()]
    return snap


def _fetch_all(urls, timeout):
    def get(url):
        try:
            r = requests.get(url, timeout=timeout, headers={"Accept": "text/plain"})
            r.raise_for_status()
            return url, r.text, None
        except requests.RequestException as e:
            return url, None, type(e).__name__ + (f" {e.response.status_code}" if getattr(e, "response", None) is not None else "")
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(urls)))) as pool:
        got = list(pool.map(get, urls))
    return {u: t for u, t, _ in got if t is not None}, {u: e for u, _, e in got if e is not None}


def snapshot_from_texts(kb: KB, first: dict, second: dict, interval_s: float) -> Snapshot:
    """Snapshot from two exposition texts per endpoint ({url or file: text}), `interval_s` apart."""
    if interval_s <= 0:
        raise InputError("scrape", "interval_s", f"must be positive, got {interval_s!r}")
    a, b = [], []
    for url in second:
        if url not in first:
            continue
        a += parse_exposition(first[url], url)
        b += parse_exposition(second[url], url)
    ia, ib = _index(a), _index(b)
    source = ", ".join(safe_url(u) if "://" in u else u for u in second)
    snap = Snapshot(source=source)
    used, missing = {}, []
    for signal in metric_signals(kb):
        for ms in signal.metrics:
            value = _checked(signal, from_scrapes(ms, ia, ib, interval_s), snap.warnings, source, f"current.{signal.id}")
            if value is not None:
                snap.current[signal.id], used[signal.id] = value, ms.metric
                break
        else:
            missing.append(signal.id)
    if not snap.current:
        raise InputError(source, "", "no known signal in the scraped metrics")
    snap.context["metric_sources"] = used
    snap.warnings.append(f"{source}: no data for {len(missing)} signals: {', '.join(sorted(missing))}")
    return snap


def parse_exposition(text: str, where: str) -> list:
    """Samples of a Prometheus text exposition, with `instance`; bad or truncated input -> InputError."""
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as e:
        raise InputError(f"{where}:{_bad_line(text)}", "", f"not a Prometheus exposition: {e}") from None
    for fam in families:
        if fam.type == "histogram":
            _check_histogram(fam, text, where)
    instance = _instance(where)
    out = []
    for fam in families:
        for s in fam.samples:
            if instance and "instance" not in s.labels:
                s = s._replace(labels={**s.labels, "instance": instance})
            out.append(s)
    return out


def _instance(where):
    p = urlsplit(where)
    return p.netloc.rsplit("@", 1)[-1] if p.scheme in ("http", "https") else ""


def _check_histogram(fam, text, where):
    """Every histogram series needs its le="+Inf" bucket and _count; a cut-off file lacks them."""
    groups = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        g = groups.setdefault(key, set())
        if s.name.endswith("_bucket") and s.labels.get("le") in ("+Inf", "Inf"):
            g.add("inf")
        elif s.name.endswith("_count"):
            g.add("count")
    for key, seen in groups.items():
        if seen != {"inf", "count"}:
            lacks = " and ".join(x for x, k in (('the le="+Inf" bucket', "inf"), ("_count", "count")) if k not in seen)
            line = _last_line_of(text, fam.name)
            raise InputError(f"{where}:{line}", fam.name, f"histogram series lacks {lacks}: the exposition looks truncated")


def _last_line_of(text, name):
    last = 0
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith(name) or line.startswith(f"# TYPE {name} ") or line.startswith(f"# HELP {name} "):
            last = i
    return last


def _bad_line(text):
    """Line number of the first line the parser rejects (parsing line by line)."""
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or (line.startswith("#") and not line.startswith(("# TYPE", "# HELP"))):
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, IndexError, TypeError):
            return i
    return 0
