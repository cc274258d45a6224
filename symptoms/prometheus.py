"""Live evidence from a Prometheus server: one instant query per metric source, now and `offset` ago.

    snap = build_snapshot(kb, "http://prom:9090", **credentials_from_env())

Credentials never reach the snapshot, its warnings or error messages. Faults are bounded: every
request has `timeout`, the whole read has `deadline` (default 4 x timeout); what could be read is
diagnosed, the signals that could not are listed in one warning; InputError only when nothing was read.
"""
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import requests
from urllib3.util.retry import Retry

from perfdoctor.errors import InputError
from perfdoctor.kb.loader import KB
from perfdoctor.symptoms.metrics import parse_vector, promql
from perfdoctor.symptoms.snapshot import Snapshot

NUMERIC = ("number", "fraction", "count")


class Unreachable(Exception):
    """The server did not answer at all (refused, DNS, TLS, timeout): stop asking it."""


def credentials_from_env(env=None) -> dict:
    """token / username / password for build_snapshot from PERFDOCTOR_PROM_* variables."""
    env = os.environ if env is None else env
    token = env.get("PERFDOCTOR_PROM_TOKEN")
    if not token and env.get("PERFDOCTOR_PROM_TOKEN_FILE"):
        path = env["PERFDOCTOR_PROM_TOKEN_FILE"]
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise InputError(path, "PERFDOCTOR_PROM_TOKEN_FILE", f"cannot read the token file: {e.strerror}")
    return {"token": token or None, "username": env.get("PERFDOCTOR_PROM_USER") or None,
            "password": env.get("PERFDOCTOR_PROM_PASSWORD") or None}


def safe_url(url: str) -> str:
    """The URL without user:password@ and without a query string."""
    p = urlsplit(url)
    host = p.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if p.port:
        netloc += f":{p.port}"
    return urlunsplit((p.scheme, netloc, p.path, "", ""))


def metric_signals(kb: KB) -> list:
    """Numeric signals the KB knows how to read from exporters."""
    return [s for s in kb.signals.values() if s.metrics and s.kind in NUMERIC]


def build_snapshot(kb: KB, url: str, window: str = "10m", baseline_offset: str = "1h", selector: str = "",
                   timeout: float = 10.0, token: str | None = None, username: str | None = None,
                   password: str | None = None, ca_file: str | None = None, verify: bool = True,
                   context: dict | None = None, deadline: float | None = None) -> Snapshot:
    """Query Prometheus at `url` for every signal with metric sources; see the module docstring."""
    query = prometheus_query(url, timeout, token, username, password, ca_file, verify)
    return snapshot_from_query(kb, query, safe_url(url), window, baseline_offset, selector, context,
                               deadline if deadline is not None else 4 * timeout, timeout)


def prometheus_query(url, timeout, token=None, username=None, password=None, ca_file=None, verify=True):
    """A function promql -> `data.result` list, through prometheus-api-client, with bounded waits."""
    from prometheus_api_client import PrometheusConnect
    from prometheus_api_client.exceptions import PrometheusApiClientException
    session = requests.Session()
    session.verify = ca_file if (ca_file and verify) else bool(verify)
    parts = urlsplit(url)
    if parts.username and not (username or token):  # user:password@ in the URL: basic auth
        username, password = unquote(parts.username), unquote(parts.password or "")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    auth = (username, password or "") if username and not token else None
    prom = PrometheusConnect(url=safe_url(url).rstrip("/"), headers=headers, auth=auth, session=session,
                             retry=Retry(total=0, raise_on_status=False), timeout=timeout)
    shown = safe_url(url)

    def query(expr, wait):
        try:
            return prom.custom_query(expr, timeout=wait)
        except PrometheusApiClientException as e:
            raise RuntimeError(_http_problem(str(e))) from None
        except (requests.ConnectionError, requests.Timeout) as e:
            raise Unreachable(f"no answer from {shown} ({type(e).__name__})") from None
        except (requests.RequestException, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"bad answer ({type(e).__name__})") from None
    return query


def _http_problem(text: str) -> str:
    """'HTTP Status Code 503 (b'...')' -> 'HTTP 503'; the body is not echoed (it may quote headers)."""
    parts = text.split()
    code = next((p for p in parts if p.isdigit()), "?")
    return f"HTTP {code}"


def snapshot_from_query(kb: KB, query, source: str, window: str = "10m", baseline_offset: str = "1h",
                        selector: str = "", context: dict | None = None, deadline: float = 40.0,
                        timeout: float = 10.0, workers: int = 8) -> Snapshot:
    """Build a Snapshot with `query(promql, timeout) -> result list`; shared by Prometheus and recordings."""
    end = time.monotonic() + deadline
    state = {"unreachable": None}
    signals = metric_signals(kb)

    def read(signal):
        return signal.id, _read_signal(signal, query, window, baseline_offset, selector, end, timeout, state)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = dict(pool.map(read, signals))
    return _assemble(kb, source, window, baseline_offset, context, results, state)


def _read_signal(signal, query, window, offset, selector, end, timeout, state):
    """First metric source with current data: (source name, current, baseline, problems)."""
    problems = []
    for ms in signal.metrics:
        now = _ask(query, promql(ms, window, None, selector), ms, end, timeout, state, problems)
        if now is None:
            continue
        base = _ask(query, promql(ms, window, offset, selector), ms, end, timeout, state, problems) \
            if offset else None
        return ms.metric, now, base, problems
    return None, None, None, problems


def _ask(query, expr, ms, end, timeout, state, problems):
    left = end - time.monotonic()
    if state["unreachable"] or left <= 0:
        problems.append("deadline" if left <= 0 else "unreachable")
        return None
    try:
        return parse_vector(ms, query(expr, min(timeout, left)))
    except Unreachable as e:
        state["unreachable"] = str(e)
    except RuntimeError as e:
        problems.append(str(e))
    return None


def _assemble(kb, source, window, offset, context, results, state):
    snap = Snapshot(source=source, context=dict(context or {}))
    used, missing, problems = {}, [], set()
    for sid, (metric, now, base, probs) in results.items():
        problems.update(p for p in probs if p not in ("unreachable", "deadline"))
        if "deadline" in probs:
            problems.add("overall deadline reached")
        now = _checked(kb.signals[sid], now, snap.warnings, source, f"current.{sid}")
        if now is None:
            missing.append(sid)
            continue
        used[sid] = metric
        snap.current[sid] = now
        base = _checked(kb.signals[sid], base, snap.warnings, source, f"baseline.{sid}")
        if base is not None:
            snap.baseline[sid] = base
    if not snap.current:
        why = state["unreachable"] or (", ".join(sorted(problems)) if problems else "no series for any known signal")
        raise InputError(source, "", f"nothing could be read: {why}")
    snap.context.setdefault("window", window)
    snap.context["metric_sources"] = used
    if state["unreachable"]:
        snap.warnings.append(f"{source}: stopped early: {state['unreachable']}")
    if problems:
        snap.warnings.append(f"{source}: some queries failed: {', '.join(sorted(problems))}")
    if missing:
        snap.warnings.append(f"{source}: no data for {len(missing)} signals: {', '.join(sorted(missing))}")
    return snap


def _checked(signal, value, warnings, source, key):
    """Drop values outside the signal's range (sentinels like vLLM V0's -1), with one warning."""
    if value is None:
        return None
    lo, hi = signal.range or (-np.inf, np.inf)
    if not isinstance(value, dict):
        if lo <= value <= hi:
            return value
        warnings.append(f"{source}: {key}: {value:g} outside {lo:g}..{hi:g} {signal.unit}, dropped")
        return None
    names = list(value)
    x = np.fromiter(value.values(), dtype=float, count=len(names))
    bad = np.nonzero((x < lo) | (x > hi))[0]
    if len(bad) == 0:
        return value
    warnings.append(f"{source}: {key}: {len(bad)} of {len(names)} values outside {lo:g}..{hi:g} "
                    f"{signal.unit}, dropped (e.g. {names[bad[0]]}={x[bad[0]]:g})")
    kept = {n: value[n] for n in np.delete(np.array(names, dtype=object), bad)}
    return kept or None
