"""Hardware ceilings as evidence: the same observations rank differently once the hardware limit is known."""
import json

import pytest
from click.testing import CliRunner

from conftest import REPO
from perfdoctor.cli import cli
from perfdoctor.symptoms.snapshot import parse_snapshot
from perfdoctor.yamlio import load_file

LOW_UTIL = REPO / "tests" / "ceiling_cases" / "low_util_decode_70b.yaml"
WORKED = REPO / "examples" / "code_completion_13b.yaml"


def _ranked(engine, data, where):
    d = engine.diagnose(parse_snapshot(data, engine.kb, where), with_probes=False)
    return d, [h.id for h in d.hypotheses], {h.id: h.probability for h in d.hypotheses}


def _without_gpu(data):
    data = json.loads(json.dumps(data))
    data["context"]["gpu"] = "unknown-accelerator"
    return data


def test_decode_near_hbm_roofline_points_to_memory_bound(engine):
    data = load_file(LOW_UTIL)
    d, ids, p = _ranked(engine, data, str(LOW_UTIL))
    decode = next(c for c in d.ceilings if c.id == "decode_tokens_per_s")
    assert round(decode.value) == 3700 and round(decode.fraction_of_ceiling, 2) == 0.81
    assert d.observations["decode_near_hbm_roofline"].present
    assert ids[0] == "decode_memory_bound"
    chain = {path["mechanism"]: path for path in d.hypotheses[0].chain}
    assert "decode_near_hbm_roofline" in [s["id"] for s in chain["hbm_saturation"]["findings"]]
    blind, blind_ids, blind_p = _ranked(engine, _without_gpu(data), "no-gpu")
    assert any("unknown GPU 'unknown-accelerator'" in w for w in blind.warnings)
    assert p["decode_memory_bound"] > 3 * blind_p["decode_memory_bound"]
    assert ids[:3] != blind_ids[:3]


def test_worked_example_ranking_changes_with_ceilings(engine):
    data = load_file(WORKED)
    d, ids, p = _ranked(engine, data, str(WORKED))
    blind, blind_ids, blind_p = _ranked(engine, _without_gpu(data), "no-gpu")
    assert ids[0] == blind_ids[0] == "prompt_length_growth"
    # 43 req/s x 800 prompt tokens is 72% of what 4 A100s can prefill: prefill itself is now suspect
    assert d.observations["prefill_near_compute_roofline"].present
    assert ids[1] == "prefill_compute_bound"
    assert p["prefill_compute_bound"] > 2 * blind_p["prefill_compute_bound"]


def test_ceilings_in_every_output_format():
    out = json.loads(CliRunner().invoke(cli, ["diagnose", str(LOW_UTIL), "--format", "json"]).output)
    decode = next(c for c in out["ceilings"] if c["id"] == "decode_tokens_per_s")
    assert decode["inputs"]["batch"] == 48 and "3.35 TB/s" in decode["formula"]
    text = CliRunner().invoke(cli, ["diagnose", str(LOW_UTIL)]).output
    assert "Decode throughput ceiling per replica (HBM bandwidth): 3700 tokens/s  observed 81% of it" in text
    md = CliRunner().invoke(cli, ["diagnose", str(LOW_UTIL), "--format", "markdown"]).output
    assert "## Hardware ceilings" in md and "| 81% |" in md
    table = CliRunner().invoke(cli, ["ceiling", str(LOW_UTIL)])
    assert table.exit_code == 0 and "KV-cache bytes per token: 3.277e+05 bytes/token" in table.output


def test_impossible_observation_is_not_evidence(engine, kb):
    """Observed above the ceiling means the context (tp, replicas) is wrong, not that the GPU is at its limit."""
    data = load_file(LOW_UTIL)
    data["context"]["tp"] = 1
    data["context"]["model"]["params_b"] = 7
    data["current"]["output_tokens_per_s"] = 90000
    d, _, _ = _ranked(engine, data, "x")
    assert "decode_roofline_frac" not in d.snapshot.current
    assert any("the context is off" in w for w in d.warnings)


def test_a_ceiling_shortfall_that_held_in_the_baseline_too_is_not_evidence(engine):
    """busbw 5 GB/s between A100 nodes before and after: the fabric always ran that far below its
    ceiling, so the shortfall says nothing about what changed; a drop from 200 to 5 GB/s does."""
    def busbw_obs(before):
        data = {"context": {"workload": "training", "gpu": "A100-80GB", "nodes": 4, "gpus_per_node": 8,
                            "world_size": 32, "model_params_b": 7},
                "baseline": {"nccl_busbw_gb_per_s": before}, "current": {"nccl_busbw_gb_per_s": 5}}
        return engine.diagnose(parse_snapshot(data, engine.kb, "t"), with_probes=False).observations
    always = busbw_obs(5)["busbw_far_below_link"]
    assert always.present is None and "held in the baseline too" in always.detail
    assert busbw_obs(200)["busbw_far_below_link"].present


def test_measured_prompt_throughput_sets_the_prefill_roofline_without_a_request_rate(engine):
    """A server log gives prompt tokens per second but no request rate: the uncached share of it is set
    against the prefill ceiling; given both, the measured rate wins over rate x mean prompt."""
    context = {"workload": "inference", "gpu": "A100-80GB", "tp": 1,
               "model": {"params_b": 7, "layers": 28, "kv_heads": 4, "head_dim": 128, "weight_dtype": "bf16"}}
    now = {"prompt_tokens_per_s": 20000, "prefix_cache_hit_rate": 0.25, "ttft_p99_s": 3.0}
    d = engine.diagnose(parse_snapshot({"context": context, "current": now}, engine.kb, "t"), with_probes=False)
    prefill = next(c for c in d.ceilings if c.id == "prefill_tokens_per_s")
    assert prefill.observed == pytest.approx(15000)   # 20000 x (1 - 0.25)
    assert prefill.value == pytest.approx(312e12 / (2 * 7e9), rel=1e-6)
    assert d.observations["prefill_near_compute_roofline"].present   # 15000 of 22286
    implied = {**now, "request_rate_rps": 1.0, "prompt_tokens_mean": 1000}
    d = engine.diagnose(parse_snapshot({"context": context, "current": implied}, engine.kb, "t"), with_probes=False)
    assert next(c for c in d.ceilings if c.id == "prefill_tokens_per_s").observed == pytest.approx(15000)


def test_a_model_named_from_the_catalog_reads_like_its_shape_and_an_unknown_name_warns(engine):
    data = load_file(LOW_UTIL)
    data["context"]["model"] = "meta-llama/Llama-3.3-70B-Instruct"   # the same 70B GQA shape, from kb/hardware/models.yaml
    d, ids, _ = _ranked(engine, data, "named")
    decode = next(c for c in d.ceilings if c.id == "decode_tokens_per_s")
    # 0.81 with the hand-written shape's 70B params; the config counts 70.55B, so a little more to read per step
    assert round(decode.fraction_of_ceiling, 2) == 0.82 and ids[0] == "decode_memory_bound"
    assert any(w.startswith("model 'meta-llama/Llama-3.3-70B-Instruct': shape of Llama 3 / 3.1 / 3.3 70B") for w in d.warnings)
    data["context"]["model"] = "Llama-3.3-70B-Instruct-but-pruned"
    d, _, _ = _ranked(engine, data, "unknown")
    assert not any(c.id == "decode_tokens_per_s" for c in d.ceilings)
    assert any("is not in kb/hardware/models.yaml" in w for w in d.warnings)


def test_a_node_listing_fewer_gpus_than_it_should_points_to_a_hardware_fault(engine):
    data = {"context": {"workload": "training", "gpu": "H100", "nodes": 2, "gpus_per_node": 8}, "changes": [],
            "baseline": {"step_time_s": 1.0}, "current": {"step_time_s": 1.6, "gpus_visible": {"node0": 8, "node1": 7}}}
    d, ids, p = _ranked(engine, data, "one GPU missing")
    listed = next(c for c in d.ceilings if c.id == "gpus_installed")
    assert (listed.value, listed.observed, listed.fraction_of_ceiling) == (8, 7, 0.875)
    assert d.observations["gpu_missing_from_node"].present
    assert ids[0] == "gpu_hardware_fault"
    data["current"]["gpus_visible"]["node1"] = 8
    full, full_ids, full_p = _ranked(engine, data, "all listed")
    assert full.observations["gpu_missing_from_node"].present is False
    assert full_ids[0] != "gpu_hardware_fault" and full_p["gpu_hardware_fault"] < p["gpu_hardware_fault"] / 3
