"""Scrape arithmetic on the real exporter fixtures, and a live two-scrape run against a local endpoint."""
import http.server
import threading
from pathlib import Path

import pytest

from perfdoctor.errors import InputError
from perfdoctor.symptoms.metrics import bucket_quantile
from perfdoctor.symptoms.scrape import scrape_snapshot, snapshot_from_texts

REAL = Path("/work/shared/fixtures/real")
needs_fixtures = pytest.mark.skipif(not REAL.is_dir(), reason="shared real fixtures not mounted")


def _same(kb, name):
    path = str(REAL / name)
    text = Path(path).read_text()
    return snapshot_from_texts(kb, {path: text}, {path: text}, 15.0)


@needs_fixtures
def test_dcgm_l4_gauges(kb):
    snap = _same(kb, "dcgm-exporter_metrics_L4_idle_full_exposition.txt")
    gpu = "i-030791dc5a37cd257/gpu0"
    assert snap.current["gpu_util"] == {gpu: 0.0}
    assert snap.current["sm_clock_mhz"] == {gpu: 210.0}
    assert snap.current["power_w"][gpu] == pytest.approx(16.4, abs=0.05)
    assert snap.baseline == {}
    assert snap.context["metric_sources"]["gpu_util"] == "DCGM_FI_DEV_GPU_UTIL"


@needs_fixtures
def test_vllm_v1_idle_reads_new_names(kb):
    snap = _same(kb, "vllm_metrics_idle_v1_qwen0.5b_full.txt")
    assert snap.context["metric_sources"]["kv_cache_usage"] == "vllm:kv_cache_usage_perc"
    assert snap.current["kv_cache_usage"] == 0.0
    assert "ttft_p99_s" not in snap.current  # no traffic: histogram_quantile is NaN, not 0


@needs_fixtures
def test_vllm_v0_truncated_excerpt_is_input_error(kb):
    with pytest.raises(InputError) as e:
        _same(kb, "vllm_metrics_v0_qwen1.5b_old_names_excerpt.txt")
    assert "vllm_metrics_v0_qwen1.5b_old_names_excerpt.txt:56" in e.value.where
    assert "truncated" in e.value.problem


@needs_fixtures
def test_node_exporter_rates_from_deltas(kb):
    path = str(REAL / "node_exporter_e2e_cpu_psi_disk_net_infiniband_excerpt.txt")
    first = Path(path).read_text()
    lines = []
    for line in first.splitlines():  # 10 s later: cpu0 spent 2 s in iowait, 8 s idle
        if line.startswith('node_cpu_seconds_total{cpu="0",mode="iowait"}'):
            line = f'{line.split()[0]} {float(line.split()[1]) + 2}'
        elif line.startswith('node_cpu_seconds_total{cpu="0",mode="idle"}'):
            line = f'{line.split()[0]} {float(line.split()[1]) + 8}'
        elif line.startswith("node_pressure_memory_waiting_seconds_total "):  # some task stalled on memory 3 s of 10
            line = f'{line.split()[0]} {float(line.split()[1]) + 3}'
        lines.append(line)
    snap = snapshot_from_texts(kb, {path: first}, {path: "\n".join(lines) + "\n"}, 10.0)
    assert snap.current["cpu_iowait_frac"] == pytest.approx(0.2)
    assert snap.current["host_cpu_util"] == pytest.approx(0.0)
    assert snap.current["memory_stall_frac"] == pytest.approx(0.3)


def test_bucket_quantile_interpolates_like_prometheus():
    inf = float("inf")
    assert bucket_quantile(0.5, [1, 2, inf], [50, 100, 100]) == pytest.approx(1.0)
    assert bucket_quantile(0.75, [1, 2, inf], [50, 100, 100]) == pytest.approx(1.5)
    assert bucket_quantile(0.99, [1, 2, inf], [50, 50, 100]) == pytest.approx(2.0)  # +Inf bucket: upper bound below
    assert bucket_quantile(0.5, [1, inf], [0, 0]) != bucket_quantile(0.5, [1, inf], [0, 0])  # NaN


def test_histogram_from_two_scrapes(kb):
    text = lambda n: (f'# TYPE vllm:time_to_first_token_seconds histogram\n'
                      f'vllm:time_to_first_token_seconds_bucket{{le="0.1"}} {5 * n}\n'
                      f'vllm:time_to_first_token_seconds_bucket{{le="1.0"}} {9 * n}\n'
                      f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {10 * n}\n'
                      f'vllm:time_to_first_token_seconds_count {10 * n}\n'
                      f'vllm:time_to_first_token_seconds_sum {2 * n}\n')
    snap = snapshot_from_texts(kb, {"http://h:8000/metrics": text(10)}, {"http://h:8000/metrics": text(20)}, 5.0)
    assert snap.current["ttft_p50_s"] == {"h:8000": pytest.approx(0.1)}
    assert snap.current["ttft_p99_s"] == {"h:8000": pytest.approx(1.0)}


def test_colon_rewritten_names_accepted(kb):
    body = "# TYPE vllm_kv_cache_usage_perc gauge\nvllm_kv_cache_usage_perc 0.5\n"
    snap = snapshot_from_texts(kb, {"f": body}, {"f": body}, 1.0)
    assert snap.current["kv_cache_usage"] == 0.5


def test_garbage_is_input_error(kb):
    with pytest.raises(InputError) as e:
        snapshot_from_texts(kb, {"x.txt": "ok 1\nthis is { not metrics\n"}, {"x.txt": "ok 1\n"}, 1.0)
    assert e.value.where == "x.txt:2"


def test_scrape_snapshot_live(kb):
    state = {"n": 0}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["n"] += 1
            body = (f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {100 * state['n']}\n"
                    "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 7\n").encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        snap = scrape_snapshot(kb, [url], interval_s=0.5, timeout=2)
    finally:
        server.shutdown()
    inst = f"127.0.0.1:{server.server_address[1]}"
    assert snap.current["requests_running"] == {inst: 7.0}
    assert snap.current["output_tokens_per_s"][inst] == pytest.approx(200, rel=0.3)


def test_scrape_snapshot_nothing_answers(kb):
    with pytest.raises(InputError):
        scrape_snapshot(kb, ["http://127.0.0.1:9/metrics"], interval_s=0.1, timeout=1)
