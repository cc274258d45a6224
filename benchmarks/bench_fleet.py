"""Fleet scale: 2,048 nodes x 8 GPUs (16,384 GPUs) of dcgm-exporter data through the Prometheus path.

Builds recorded /api/v1/query responses (JSON text, as Prometheus returns them) for every dcgm signal,
feeds them to the same parsing code build_snapshot uses (snapshot_from_query), then diagnoses.
One GPU (node1337/gpu5) has a low SM clock and low SM activity; the run checks it is found.
Usage: python benchmarks/bench_fleet.py
"""
import json
import time

import numpy as np

from perfdoctor.engine.rank import Engine
from perfdoctor.symptoms.metrics import promql
from perfdoctor.symptoms.prometheus import metric_signals, snapshot_from_query

NODES, GPUS = 2048, 8
SLOW = ("node1337", "5")
TYPICAL = {"DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_PROF_SM_ACTIVE": 0.82, "DCGM_FI_DEV_GPU_UTIL": 97,
           "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.45, "DCGM_FI_PROF_DRAM_ACTIVE": 0.55, "DCGM_FI_DEV_POWER_USAGE": 610,
           "DCGM_FI_DEV_GPU_TEMP": 64, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0}
SLOW_VALUE = {"DCGM_FI_DEV_SM_CLOCK": 1100, "DCGM_FI_PROF_SM_ACTIVE": 0.41}


def recorded_responses(kb, window="10m", offset="1h") -> dict:
    """{promql: response JSON text} for the first dcgm source of every signal, now and baseline."""
    rng = np.random.default_rng(0)
    out = {}
    for s in metric_signals(kb):
        ms = next((m for m in s.metrics if m.source == "dcgm" and m.metric in TYPICAL), None)
        if ms is None:
            continue
        for off in (None, offset):
            base = TYPICAL[ms.metric]
            noise = rng.normal(0, 0.005 * (abs(base) or 1), NODES * GPUS) if base else np.zeros(NODES * GPUS)
            vals = (base + noise) * (ms.scale if ms.kind == "gauge" else 1)
            result, i = [], 0
            for n in range(NODES):
                for g in range(GPUS):
                    v = vals[i]
                    if off is None and (f"node{n}", str(g)) == SLOW and ms.metric in SLOW_VALUE:
                        v = SLOW_VALUE[ms.metric] * ms.scale
                    result.append({"metric": {"Hostname": f"node{n}", "gpu": str(g)}, "value": [1.7e9, repr(float(v))]})
                    i += 1
            out[promql(ms, window, off)] = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
    return out


def main():
    t0 = time.perf_counter()
    engine = Engine.load()
    t1 = time.perf_counter()
    responses = recorded_responses(engine.kb)
    t2 = time.perf_counter()

    def query(expr, timeout):  # what PrometheusConnect.custom_query does with the HTTP body
        text = responses.get(expr)
        return json.loads(text)["data"]["result"] if text else []

    snap = snapshot_from_query(engine.kb, query, "recorded", context={"workload": "training", "gpu": "H100-80GB",
                                                                      "nodes": NODES, "gpus_per_node": GPUS})
    t3 = time.perf_counter()
    dx = engine.diagnose(snap)
    t4 = time.perf_counter()
    n = len(snap.current["sm_clock_mhz"])
    top = dx.hypotheses[0]
    found = "node1337/gpu5" in top.localization["entities"]
    print(f"GPUs: {n}, signals: {len(snap.current)}, responses: {len(responses)} "
          f"({sum(map(len, responses.values())) / 1e6:.0f} MB JSON)")
    print(f"engine load {t1 - t0:.2f} s (not counted) | build responses {t2 - t1:.2f} s (not counted)")
    print(f"parse + snapshot {t3 - t2:.2f} s | diagnose {t4 - t3:.2f} s | total {t4 - t2:.2f} s (target < 2 s)")
    print(f"top cause: {top.id} ({top.probability:.2f}); localization: {top.localization['text'][:120]}")
    print(f"slow GPU node1337/gpu5 found: {found}")
    return 0 if found else 1


if __name__ == "__main__":
    raise SystemExit(main())
