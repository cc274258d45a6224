"""Evidence beyond thresholds: marginal changes are not read as 'nothing moved', context facts are findings."""
import pytest

from perfdoctor.symptoms.snapshot import parse_snapshot

SERVING = {"workload": "inference", "nodes": 2, "gpus_per_node": 8, "engine": "vllm"}


def _diagnose(engine, context, baseline, current):
    snap = parse_snapshot({"context": context, "baseline": baseline, "current": current}, engine.kb, "test")
    return engine.diagnose(snap, with_probes=False)


@pytest.mark.parametrize("now, expected", [(850, True), (930, None), (985, False), (1200, False)])
def test_throughput_drop_is_present_marginal_or_absent(engine, now, expected):
    # throughput_down fires at <= 0.9x; between 0.9x and ~0.95x it is too close to call either way
    d = _diagnose(engine, SERVING, {"output_tokens_per_s": 1000}, {"output_tokens_per_s": now})
    obs = d.observations["throughput_down"]
    assert obs.present is expected
    assert ("throughput_down" in engine.evidence(d.observations)) is (expected is not None)
    if expected is None:
        assert "marginal" in obs.detail


def test_marginal_per_entity_change_is_not_evidence(engine):
    base = {"step_time_s": {"rank0": 1.0, "rank1": 1.0}}
    d = _diagnose(engine, {"workload": "training"}, base, {"step_time_s": {"rank0": 1.07, "rank1": 1.01}})
    assert d.observations["step_time_up"].present is None
    d = _diagnose(engine, {"workload": "training"}, base, {"step_time_s": {"rank0": 1.2, "rank1": 1.01}})
    assert d.observations["step_time_up"].present and d.observations["step_time_up"].entities == ["rank0"]


def test_tensor_parallel_group_across_nodes_is_evidence(engine):
    base = {"itl_p50_s": 0.030, "output_tokens_per_s": 2000}
    now = {"itl_p50_s": 0.060, "output_tokens_per_s": 1100}
    across = _diagnose(engine, {**SERVING, "tp": 16}, base, now)
    inside = _diagnose(engine, {**SERVING, "tp": 8}, base, now)
    assert across.observations["tp_spans_nodes"].present
    assert inside.observations["tp_spans_nodes"].present is False
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "tensor_parallel_comm")
    assert p(across) > 3 * p(inside)
    # a value the user measured directly is not overwritten by the context
    given = _diagnose(engine, {**SERVING, "tp": 16}, base, {**now, "tp_per_node_frac": 0.5})
    assert given.observations["tp_spans_nodes"].present is False
