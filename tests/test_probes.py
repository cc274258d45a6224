"""Next probes: ranked by information gain per minute, never asking for what is already known."""
import pytest
from conftest import REPO
from perfdoctor.symptoms.snapshot import load_snapshot, parse_snapshot


def test_known_signals_are_not_asked_again(engine):
    snap = load_snapshot(REPO / "examples" / "code_completion_13b.yaml", engine.kb)
    d = engine.diagnose(snap)
    for p in d.next_probes:
        assert not set(p.signals) & set(snap.current)
    assert "ask_changes" not in [p.id for p in d.next_probes]   # changes were given


@pytest.mark.parametrize("workload, signal", [("training", "step_time_s"), ("inference", "ttft_p50_s")])
def test_what_changed_is_asked_when_unknown(engine, workload, signal):
    """With only the headline metric known, 'what changed?' is among the first eight of the 42 questions for
    either workload (a serving incident first asks for the load, the GPUs, the latency split, the KV cache, the
    host, the parallel layout and the gateway, whose router view now also tells a balancer that miscounts load)."""
    snap = parse_snapshot({"context": {"workload": workload}, "current": {signal: 2.0}, "baseline": {signal: 1.5}},
                          engine.kb)
    d = engine.diagnose(snap)
    ids = [p.id for p in d.next_probes]
    assert "ask_changes" in ids[:8]
    first = d.next_probes[0]
    assert first.gain_bits > 0 and first.command
    assert [p.score for p in d.next_probes] == sorted((p.score for p in d.next_probes), reverse=True)


def test_probes_fit_the_workload(engine):
    """A training job is not asked for vLLM metrics or client RTT; its step profile carries real information."""
    snap = parse_snapshot({"context": {"workload": "training"}, "current": {"step_time_s": 2.0},
                           "baseline": {"step_time_s": 1.5}}, engine.kb)
    gains = {p.id: p.gain_bits for p in engine.diagnose(snap).next_probes}
    assert "client_rtt" not in gains and "serving_latency_breakdown" not in gains
    assert gains["training_step_profile"] > 0.1
