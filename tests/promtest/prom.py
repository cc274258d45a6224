"""Start a real Prometheus (Debian package) on a backfilled TSDB, and stop it."""
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"

CONFIG = """global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: scenario
    honor_labels: true
    static_configs: [{{targets: ["127.0.0.1:{exporter}"]}}]
    metric_relabel_configs:
      - {{source_labels: [instance], regex: "127\\\\.0\\\\.0\\\\.1:{exporter}", target_label: instance, replacement: ""}}
"""


def backfill(openmetrics_text: str, data_dir: Path, work: Path):
    path = work / "baseline.om"
    path.write_text(openmetrics_text)
    r = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(path), str(data_dir)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"promtool backfill failed: {r.stdout[-2000:]} {r.stderr[-2000:]}")


def start(work: Path, data_dir: Path, exporter_port: int, port: int):
    cfg = work / "prometheus.yml"
    cfg.write_text(CONFIG.format(exporter=exporter_port))
    log = open(work / "prometheus.log", "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={data_dir}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    return proc


def query(url: str, expr: str, timeout=5.0):
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=timeout) as r:
        return json.load(r)["data"]["result"]


def wait_for(url: str, proc, work: Path, expr: str, min_value: float, deadline_s: float):
    """Poll `expr` until its first value >= min_value; on death or timeout raise with the log."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError("prometheus exited:\n" + (work / "prometheus.log").read_text()[-4000:])
        try:
            res = query(url, expr)
            if res and float(res[0]["value"][1]) >= min_value:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no data for {expr} in {deadline_s}s:\n" + (work / "prometheus.log").read_text()[-4000:])


def stop(proc):
    """Stop Prometheus (terminate, then kill)."""
    from conftest import stop_process
    stop_process(proc, timeout=10)
