"""Live evidence from a real Prometheus (Debian `prometheus` package) against labeled scenarios."""
import dataclasses
import http.server
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from perfdoctor.engine.rank import Engine
from perfdoctor.errors import InputError
from perfdoctor.symptoms.metrics import promql
from perfdoctor.symptoms.prometheus import build_snapshot, credentials_from_env, metric_signals
from perfdoctor.symptoms.snapshot import load_snapshot
sys.path.insert(0, str(Path(__file__).parent))
from promtest import prom  # noqa: E402
from promtest.exporter import free_port, start_exporter  # noqa: E402
from promtest.scenario import ScenarioSeries, openmetrics_file  # noqa: E402

HERE = Path(__file__).parent
SCENARIOS = [HERE / "promtest/scenarios/single_slow_gpu_of_16.yaml",
             HERE / "scenarios/noisy_neighbor_cpu_steal_vm.yaml",
             HERE / "scenarios/kv_cache_exhaustion_max_seqs_raise.yaml",
             HERE / "scenarios/storage_io_bottleneck_nfs_degraded.yaml"]
WINDOW = "30s"
needs_prometheus = pytest.mark.skipif(not (shutil.which(prom.PROMETHEUS) and shutil.which(prom.PROMTOOL)),
                                      reason="apt-get install prometheus")


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def live(engine, tmp_path_factory):
    """An exporter for all scenarios, a backfilled baseline one hour back, and Prometheus scraping it."""
    if not shutil.which(prom.PROMETHEUS):
        pytest.skip("prometheus not installed")
    work = tmp_path_factory.mktemp("prom")
    data = work / "data"
    scenarios = {}
    for path in SCENARIOS:
        doc = yaml.safe_load(path.read_text())
        scenarios[doc["id"]] = ScenarioSeries(engine.kb, doc["id"], doc["snapshot"])
    now = time.time()
    prom.backfill(openmetrics_file(list(scenarios.values()), now - 3600 - 900, now - 3600 + 900), data, work)
    port, server, proc = None, None, None
    try:
        port, server = start_exporter(list(scenarios.values()))
        url = f"http://127.0.0.1:{free_port()}"
        proc = prom.start(work, data, port, int(url.rsplit(":", 1)[1]))
        prom.wait_for(url, proc, work, 'count_over_time(up{job="scenario"}[40s])', 33, deadline_s=90)
        prom.wait_for(url, proc, work, 'count(DCGM_FI_DEV_SM_CLOCK offset 1h)', 1, deadline_s=10)
        yield {"url": url, "scenarios": scenarios, "work": work}
    finally:
        prom.stop(proc)
        if server is not None:
            server.shutdown()


def _ranking(diagnosis):
    return [h.id for h in diagnosis.hypotheses]


@needs_prometheus
@pytest.mark.parametrize("name", [yaml.safe_load(p.read_text())["id"] for p in SCENARIOS])
def test_live_ranking_matches_snapshot_file(live, engine, name, tmp_path):
    sc = live["scenarios"][name]
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump(sc.equivalent_snapshot()))
    from_file = engine.diagnose(load_snapshot(file, engine.kb))
    snap = build_snapshot(engine.kb, live["url"], window=WINDOW, baseline_offset="1h",
                          selector=f'scenario="{name}"', timeout=5, context=sc.snapshot.get("context"))
    from_live = engine.diagnose(snap)
    a, b = _ranking(from_file), _ranking(from_live)
    assert a[0] == b[0], (a[:3], b[:3], snap.current, snap.warnings)
    assert set(a[:3]) == set(b[:3])
    assert snap.context["metric_sources"]["sm_clock_mhz"] == "DCGM_FI_DEV_SM_CLOCK"
    if name == "single_slow_gpu_of_16":
        assert "node1/gpu5" in from_live.hypotheses[0].localization["entities"]
        assert snap.current["sm_clock_mhz"]["node1/gpu5"] == pytest.approx(1100)
        assert snap.baseline["sm_clock_mhz"] == pytest.approx(1980)
    if name == "storage_io_bottleneck_nfs_degraded":   # MemAvailable over MemTotal, a ratio of two gauges
        assert snap.current["memory_available_frac"] == pytest.approx(0.64)
        assert snap.context["metric_sources"]["memory_available_frac"] == "node_memory_MemAvailable_bytes"


@needs_prometheus
def test_missing_series_listed_in_warnings(live, engine):
    name = "single_slow_gpu_of_16"
    snap = build_snapshot(engine.kb, live["url"], window=WINDOW, selector=f'scenario="{name}"', timeout=5)
    assert "kv_cache_usage" not in snap.current and "sm_active" in snap.current
    lines = [w for w in snap.warnings if "no data for" in w]
    assert len(lines) == 1 and "kv_cache_usage" in lines[0] and "sm_active" not in lines[0].split(": ", 2)[-1].split(", ")
    assert engine.diagnose(snap).hypotheses


@needs_prometheus
def test_promql_passes_promtool(engine, tmp_path):
    rules = []
    for s in metric_signals(engine.kb):
        for i, ms in enumerate(s.metrics):
            for off in (None, "1h"):
                rules.append({"record": f"perfdoctor:{s.id}:{i}{'_base' if off else ''}",
                              "expr": promql(ms, "10m", off, 'job="x"')})
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "perfdoctor", "rules": rules}]}))
    r = subprocess.run([prom.PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_prometheus_down_fails_fast(engine):
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(InputError) as e:
        build_snapshot(engine.kb, url, timeout=2)
    assert time.monotonic() - t0 < 2 + 2
    assert url in str(e.value) and "nothing could be read" in str(e.value)


class _FakeProm(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        self.seen.append(self.headers.get("Authorization"))
        result = []
        if "DCGM_FI_DEV_SM_CLOCK" in self.path:
            result = [{"metric": {"Hostname": "n1", "gpu": str(i)}, "value": [time.time(), "1980"]} for i in range(4)]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_bearer_token_sent_and_never_stored(engine, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeProm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        secret = "s3cr3t-token-value"
        monkeypatch.setenv("PERFDOCTOR_PROM_TOKEN", secret)
        url = f"http://user:pw-secret@127.0.0.1:{server.server_address[1]}"
        snap = build_snapshot(engine.kb, url, timeout=5, **credentials_from_env())
    finally:
        server.shutdown()
    assert f"Bearer {secret}" in _FakeProm.seen
    assert snap.current["sm_clock_mhz"] == {f"n1/gpu{i}": 1980.0 for i in range(4)}
    dump = yaml.safe_dump(dataclasses.asdict(snap))
    for s in (secret, "pw-secret"):
        assert s not in dump and s not in repr(snap)
    assert any("no data for" in w for w in snap.warnings)


def test_credentials_from_token_file(tmp_path):
    f = tmp_path / "token"
    f.write_text("abc\n")
    assert credentials_from_env({"PERFDOCTOR_PROM_TOKEN_FILE": str(f), "PERFDOCTOR_PROM_USER": "u"}) == \
        {"token": "abc", "username": "u", "password": None}


@needs_prometheus
def test_cli_diagnose_and_snapshot_from_live_prometheus(live, tmp_path):
    """The CLI end to end: rank from Prometheus, write the snapshot, replay it with the same ranking."""
    import json

    from click.testing import CliRunner

    from perfdoctor.cli import cli
    name = "single_slow_gpu_of_16"
    ctx = tmp_path / "context.yaml"
    ctx.write_text(yaml.safe_dump({"context": live["scenarios"][name].snapshot.get("context"), "current": {}}))
    args = ["--prometheus", live["url"], "--window", WINDOW, "--selector", f'scenario="{name}"', "--timeout", "5"]
    direct = CliRunner().invoke(cli, ["diagnose", *args, "--format", "json"])
    assert direct.exit_code == 0, direct.output
    written = tmp_path / "snap.yaml"
    assert CliRunner().invoke(cli, ["snapshot", *args, "-o", str(written)]).exit_code == 0
    replay = CliRunner().invoke(cli, ["diagnose", str(written), "--format", "json"])
    first = [h["id"] for h in json.loads(direct.output)["hypotheses"]]
    again = [h["id"] for h in json.loads(replay.output)["hypotheses"]]
    assert first[:3] == again[:3]
    assert "node1/gpu5" in json.loads(direct.output)["hypotheses"][0]["localization"]["entities"]
