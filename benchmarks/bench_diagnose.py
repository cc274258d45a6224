"""Cold start and warm diagnose times, beside plain pgmpy VariableElimination on the same network.

Run: python benchmarks/bench_diagnose.py   (targets on a 2-core machine: warm < 100 ms, cold < 2 s)
"""
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = [REPO / "examples" / "code_completion_13b.yaml", REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml"]

COLD = """
import time; t0 = time.perf_counter()
from perfdoctor.engine.rank import Engine
engine = Engine.load()
print(time.perf_counter() - t0)
"""


def cold_start(runs=5):
    """Median seconds for a fresh interpreter to import perfdoctor, load the KB and build the network."""
    inner, outer = [], []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True)
        outer.append(time.perf_counter() - t)
        inner.append(float(out.stdout))
    return statistics.median(inner), statistics.median(outer)


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    from perfdoctor.engine.findings import evaluate
    from perfdoctor.engine.rank import Engine
    from perfdoctor.kb.loader import CHANGE_PREFIX
    from perfdoctor.symptoms.snapshot import parse_snapshot
    from perfdoctor.yamlio import load_file

    inner, outer = cold_start()
    print(f"cold start: import + load KB + build network {inner * 1000:.0f} ms; whole process {outer * 1000:.0f} ms")
    engine = Engine.load()
    print(f"network: {len(engine.net.causes)} causes, {len(engine.net.mechanisms)} mechanisms, "
          f"{len(engine.net.findings)} findings")

    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgmpy.inference import VariableElimination

        from perfdoctor.engine.network import to_pgmpy
        import_s = time.perf_counter() - t
        t = time.perf_counter()
        ve = VariableElimination(to_pgmpy(engine.net))
        build_s = time.perf_counter() - t
    print(f"pgmpy: import {import_s * 1000:.0f} ms, build the same network {build_s * 1000:.0f} ms")

    for path in CASES:
        data = load_file(path)
        snap = parse_snapshot(data.get("snapshot", data), engine.kb, str(path))
        evidence = engine.evidence(evaluate(engine.kb, snap))
        posterior = timed(lambda: engine.inference.query(evidence), 30)
        warm = timed(lambda: engine.diagnose(snap), 20)
        # pgmpy gets the evidence without the change list: the cause's change-choice nodes make its
        # elimination take minutes (or run out of memory) on the full KB; ours is timed on the same evidence
        plain = {f: v for f, v in evidence.items() if not f.startswith(CHANGE_PREFIX)}
        ours_plain = timed(lambda: engine.inference.query(plain), 30)
        states = {f: ("on" if v else "off") for f, v in plain.items()}

        def pgmpy_all_causes():
            return [ve.query([c], evidence=states, show_progress=False) for c in engine.net.causes]
        pg = timed(pgmpy_all_causes, 3)
        print(f"{path.name}: {len(evidence)} findings observed")
        print(f"  perfdoctor posterior of all causes       {posterior * 1000:7.1f} ms")
        print(f"  perfdoctor warm diagnose (+probes, why)  {warm * 1000:7.1f} ms")
        print(f"  without the change list: perfdoctor {ours_plain * 1000:.1f} ms, pgmpy VE one query per cause "
              f"{pg * 1000:.1f} ms, ratio {pg / ours_plain:.0f}x")


if __name__ == "__main__":
    main()
