"""Every scenario ranks its expected root cause in the top 3; the worked example explains itself."""
import pytest

from conftest import REPO, SCENARIOS
from perfdoctor.symptoms.snapshot import load_snapshot, parse_snapshot
from perfdoctor.yamlio import load_file


def _rank(engine, path):
    case = load_file(path)
    snap = parse_snapshot(case["snapshot"], engine.kb, str(path))
    d = engine.diagnose(snap, with_probes=False)
    ids = [h.id for h in d.hypotheses]
    ok = {case["expected"]["root_cause"], *case["expected"].get("also_acceptable", [])}
    return min(ids.index(c) for c in ok) + 1, d, case


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_ranks_expected_cause_in_top3(engine, path):
    rank, d, case = _rank(engine, path)
    top = ", ".join(f"{h.id}={h.probability:.2f}" for h in d.hypotheses[:3])
    assert rank <= 3, f"{case['expected']['root_cause']} ranked {rank}; top: {top}"


def test_every_root_cause_has_a_scenario(kb):
    covered = {load_file(p)["expected"]["root_cause"] for p in SCENARIOS}
    assert set(kb.root_causes) - covered == set()


@pytest.fixture(scope="module")
def worked(engine):
    return engine.diagnose(load_snapshot(REPO / "examples" / "code_completion_13b.yaml", engine.kb))


def test_worked_example_prompt_growth_on_top(worked):
    top = worked.hypotheses[0]
    assert top.id == "prompt_length_growth"
    assert top.probability > 0.9


def test_worked_example_chain_goes_through_prefill_kv_and_hbm(worked):
    mechanisms = [p["mechanism"] for p in worked.hypotheses[0].chain]
    for needed in ("prefill_load", "kv_pressure", "hbm_saturation"):
        assert needed in mechanisms
    hbm = next(p for p in worked.hypotheses[0].chain if p["mechanism"] == "hbm_saturation")
    assert any(s["id"] == "dram_active_high" and "0.95" in s["observed"] for s in hbm["findings"])


def test_worked_example_remedies_carry_their_counterexample(worked):
    remedies = {r["id"]: r for r in worked.hypotheses[0].remedies}
    for needed in ("prefix_caching", "cap_prompt_length", "sjf_scheduling"):
        assert needed in remedies
        assert len(remedies[needed]["counterexample"]) > 20
        assert remedies[needed]["retest"]


def test_low_util_is_not_a_verdict(engine):
    """Idle Tensor Cores with saturated HBM point at memory-bound decode, not at an idle or starved GPU."""
    rank, d, _ = _rank(engine, REPO / "tests" / "scenarios" / "low_util_hbm_bound_decode.yaml")
    assert rank == 1
    ids = [h.id for h in d.hypotheses]
    assert ids.index("decode_memory_bound") < ids.index("input_pipeline_stall")


def test_single_slow_gpu_is_named(engine):
    rank, d, _ = _rank(engine, REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml")
    assert rank == 1
    assert "node2/gpu5" in d.hypotheses[0].localization["entities"]


def test_evidence_for_and_against_are_signed(worked):
    top = worked.hypotheses[0]
    assert all(e["shift"] > 0 for e in top.evidence["for"])
    alternatives = worked.hypotheses[1:4]
    assert all(e["shift"] < 0 for h in alternatives for e in h.evidence["against"])
    assert any(h.evidence["against"] for h in alternatives), "an alternative cause should have evidence against it"
