"""Evidence beyond thresholds: marginal changes are not read as 'nothing moved', context facts are findings."""
import pytest

from perfdoctor.errors import InputError
from perfdoctor.symptoms.snapshot import parse_snapshot

SERVING = {"workload": "inference", "nodes": 2, "gpus_per_node": 8, "engine": "vllm"}


def _diagnose(engine, context, baseline, current):
    snap = parse_snapshot({"context": context, "baseline": baseline, "current": current}, engine.kb, "test")
    return engine.diagnose(snap, with_probes=False)


def _context_flag_effect(engine, key, finding, cause, base, now):
    """P(cause) with the serving context's `key` true, left out and false; `finding` must follow the key."""
    on = _diagnose(engine, {**SERVING, key: True}, base, now)
    off = _diagnose(engine, {**SERVING, key: False}, base, now)
    assert on.observations[finding].present and off.observations[finding].present is False
    return _p(on, cause), _p(_diagnose(engine, SERVING, base, now), cause), _p(off, cause)


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


def test_slow_ethernet_between_nodes_points_to_scale_out_not_rdma(engine):
    ctx = {"workload": "training", "nodes": 2, "gpus_per_node": 8}
    base = {"step_time_s": 0.5, "comm_time_frac": 0.3}
    now = {"step_time_s": 0.8, "comm_time_frac": 0.55, "nccl_transport": "NET/Socket"}
    tcp = _diagnose(engine, {**ctx, "interconnect": "10GbE"}, base, now)
    ib = _diagnose(engine, {**ctx, "interconnect": "HDR"}, base, now)
    assert tcp.observations["slow_scaleout_link"].present and not ib.observations["slow_scaleout_link"].present
    p = lambda d, c: next(h.probability for h in d.hypotheses if h.id == c)
    # Socket transport on an InfiniBand cluster is a missing RDMA path; on plain Ethernet it is all there is
    assert p(ib, "gpudirect_rdma_disabled") > 0.5
    assert p(tcp, "gpudirect_rdma_disabled") < 0.1 < 0.5 < p(tcp, "scale_out_comm_bound")


def test_socket_transport_is_a_fault_only_where_rdma_adapters_exist(engine):
    """Link speed unknown: whether the nodes have IB/RoCE/EFA adapters decides what NET/Socket means."""
    ctx = {"workload": "training", "nodes": 2, "gpus_per_node": 8}
    base = {"step_time_s": 0.5, "comm_time_frac": 0.3}
    now = {"step_time_s": 1.5, "comm_time_frac": 0.75, "nccl_transport": "NET/Socket"}
    with_hcas, unknown, ethernet = (_diagnose(engine, {**ctx, **extra}, base, now)
                                    for extra in ({"rdma": True}, {}, {"rdma": False}))
    assert with_hcas.observations["rdma_nics_present"].present
    assert ethernet.observations["rdma_nics_present"].present is False
    # sockets with the adapters there is the fault itself; without them the fact is unknown or absent
    assert with_hcas.observations["nccl_socket_despite_rdma"].present
    assert getattr(unknown.observations.get("nccl_socket_despite_rdma"), "present", None) is None
    assert ethernet.observations["nccl_socket_despite_rdma"].present is False
    assert with_hcas.hypotheses[0].id == "gpudirect_rdma_disabled" and _p(with_hcas, "gpudirect_rdma_disabled") > 0.9
    assert _p(with_hcas, "gpudirect_rdma_disabled") > _p(unknown, "gpudirect_rdma_disabled") > \
        2 * _p(ethernet, "gpudirect_rdma_disabled")
    assert ethernet.hypotheses[0].id == "scale_out_comm_bound"
    assert _p(ethernet, "scale_out_comm_bound") > _p(unknown, "scale_out_comm_bound")


def test_an_infiniband_or_roce_interconnect_means_rdma_adapters(engine):
    parsed = lambda link, **extra: parse_snapshot({"context": {"workload": "training", "interconnect": link, **extra},
                                                   "current": {"step_time_s": 1.0}}, engine.kb, "t").context
    assert parsed("HDR")["rdma"] is True and parsed("RoCE 400G")["rdma"] is True
    assert "rdma" not in parsed("25GbE")   # RoCE can run on it; the name alone does not say
    with pytest.raises(InputError, match=r"t: context.rdma: false, but context.interconnect 'HDR' is infiniband"):
        parsed("HDR", rdma=False)


@pytest.mark.parametrize("measured, rdma", [
    ({"nccl_transport": "NET/IB/0/GDRDMA"}, True),            # NCCL on IB or RoCE verbs
    ({"nccl_transport": {"node0": "NET/Socket"}}, None),      # sockets say nothing about the hardware
    ({"ib_write_bw_gbit_per_s": {"node0/mlx5_0": 180}}, True),  # ib_write_bw runs only on an RDMA adapter
])
def test_rdma_measurements_mean_rdma_adapters(engine, measured, rdma):
    snap = parse_snapshot({"context": {"workload": "training", "nodes": 2},
                           "current": {"step_time_s": 1.0, **measured}}, engine.kb, "t")
    assert snap.context.get("rdma") is rdma


def test_unknown_interconnect_is_a_warning_not_an_error(engine):
    d = _diagnose(engine, {"workload": "training", "nodes": 2, "gpus_per_node": 8, "interconnect": "carrier pigeon"},
                  {"step_time_s": 0.5}, {"step_time_s": 0.8})
    assert any("unknown interconnect 'carrier pigeon'" in w for w in d.warnings)
    assert "scaleout_link_gbit_s" not in d.snapshot.current


def test_half_the_gpus_without_nvlink_are_flagged_against_the_best_peer(engine):
    links = {"gpu0": 0, "gpu1": 0, "gpu2": 12, "gpu3": 12}
    d = _diagnose(engine, {"workload": "inference", "nodes": 1, "gpus_per_node": 4, "tp": 2}, {},
                  {"nvlink_active_links": links})
    obs = d.observations["nvlink_links_down"]
    assert obs.present and obs.entities == ["gpu0", "gpu1"] and "best peer 12" in obs.detail
    assert d.hypotheses[0].id == "nvlink_degradation"
    healthy = _diagnose(engine, {"workload": "inference"}, {}, {"nvlink_active_links": {f"gpu{i}": 18 for i in range(8)}})
    assert healthy.observations["nvlink_links_down"].present is False


def test_one_gpu_rules_out_imbalance_and_gpu_to_gpu_traffic(engine):
    """On a single GPU nothing is imbalanced across replicas and no TP, NVLink or KV-transfer traffic exists."""
    multi_gpu_only = ["load_imbalance", "tensor_parallel_comm", "nvlink_degradation", "kv_transfer_bottleneck"]
    idx = [engine.net.causes.index(c) for c in multi_gpu_only]
    one = engine.priors({"workload": "inference", "nodes": 1, "gpus_per_node": 1})
    eight = engine.priors({"workload": "inference", "nodes": 1, "gpus_per_node": 8})
    unknown = engine.priors({"workload": "inference"})
    for i in idx:
        assert one[i] < 0.1 * eight[i]
        assert eight[i] == unknown[i]
    two_replicas_one_gpu = engine.priors({"workload": "inference", "gpus": 1, "replicas": 2})
    assert two_replicas_one_gpu[engine.net.causes.index("load_imbalance")] == unknown[idx[0]]


def test_rl_rollouts_on_an_inference_engine_keep_the_serving_causes(engine):
    """A GRPO job whose rollouts run on vLLM: its snapshot says training, but running requests and KV-cache use
    come only from an inference engine, so a small generation batch can be the cause; without those readings
    the same training snapshot rules the serving causes out."""
    context = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    trainer = {"step_time_s": 420, "gpu_idle_frac": {f"rank{i}": 0.57 for i in range(7)}, "gpu_util": {"gpu7": 0.35}}
    rollouts = _diagnose(engine, context, {}, {**trainer, "requests_running": 7, "kv_cache_usage": 0.1})
    assert rollouts.observations["running_small_with_kv_room"].present
    assert rollouts.hypotheses[0].id == "batching_underutilization"
    alone = _diagnose(engine, context, {}, trainer)
    assert _p(alone, "batching_underutilization") < 0.1 * _p(rollouts, "batching_underutilization")
    stated = _diagnose(engine, {**context, "rollouts": True}, {}, trainer)   # HF generate inside the trainer
    assert _p(stated, "batching_underutilization") > 10 * _p(alone, "batching_underutilization")
    i = engine.net.causes.index("kv_cache_exhaustion")
    assert engine.priors(context, generates=True)[i] == engine.priors({"workload": "inference"})[i]
    assert engine.priors(context)[i] < 0.05 * engine.priors(context, generates=True)[i]


def test_prefill_decode_disaggregation_decides_whether_kv_transfer_can_be_the_cause(engine):
    """TTFT x30 with ITL flat: under PD disaggregation the per-request KV hand-off is a prime suspect;
    on a colocated engine there is no such hand-off, so the same symptoms rule it out."""
    base = {"ttft_p50_s": 1.4, "itl_p50_s": 0.014}
    now = {"ttft_p50_s": 45.0, "itl_p50_s": 0.014}
    split, unknown, colocated = _context_flag_effect(engine, "disaggregated", "pd_disaggregated",
                                                     "kv_transfer_bottleneck", base, now)
    assert split > 3 * unknown > 3 * colocated


def test_clients_calling_the_engines_directly_rule_out_a_gateway(engine):
    """TTFT x10 with the engines' own queue empty: time is lost in front of the engines, if anything is there."""
    base = {"ttft_p50_s": 0.15, "queue_time_p50_s": 0.0, "requests_waiting": 0}
    now = {"ttft_p50_s": 1.5, "queue_time_p50_s": 0.0, "requests_waiting": 0}
    proxied, unknown, direct = _context_flag_effect(engine, "gateway", "gateway_in_path", "gateway_saturation",
                                                    base, now)
    assert proxied > 1.3 * unknown > 5 * direct
    named = _diagnose(engine, {**SERVING, "gateway": "Envoy"}, base, now)
    assert named.observations["gateway_in_path"].present and _p(named, "gateway_saturation") == pytest.approx(proxied)
    assert _diagnose(engine, {**SERVING, "gateway": "none"}, base, now).observations["gateway_in_path"].present is False


def test_a_proxy_put_in_front_before_the_regression_points_at_it(engine):
    """The same TTFT rise, with 'nothing changed' vs 'the request path changed': only the latter names the gateway."""
    base = {"ttft_p50_s": 0.15, "requests_waiting": 0}
    now = {"ttft_p50_s": 1.5, "requests_waiting": 0}

    def ranked(changes):
        raw = {"context": {**SERVING, "gateway": "litellm"}, "changes": changes, "baseline": base, "current": now}
        return engine.diagnose(parse_snapshot(raw, engine.kb, "test"), with_probes=False)

    moved, unchanged = ranked(["request_path"]), ranked([])
    assert moved.observations["changed_request_path"].present
    assert unchanged.observations["changed_request_path"].present is False
    assert moved.hypotheses[0].id == "gateway_saturation"
    assert _p(moved, "gateway_saturation") > 3 * _p(unchanged, "gateway_saturation")


def test_rdma_retransmissions_point_at_the_fabric(engine):
    """busbw halved across nodes: with go-back-N resends on a port the fabric is losing packets."""
    ctx = {"workload": "training", "nodes": 4, "gpus_per_node": 8, "interconnect": "roce_400g"}
    base, now = {"nccl_busbw_gb_per_s": 40.0}, {"nccl_busbw_gb_per_s": 18.0}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "rdma_network_degradation")
    lossy = _diagnose(engine, ctx, base, {**now, "rdma_retransmits": {"mlx5_0/1": 4830, "mlx5_1/1": 0}})
    clean = _diagnose(engine, ctx, base, {**now, "rdma_retransmits": {"mlx5_0/1": 0, "mlx5_1/1": 0}})
    assert lossy.observations["rdma_retransmits_present"].entities == ["mlx5_0/1"]
    assert p(lossy) > 2 * p(clean)
    assert lossy.hypotheses[0].id == "rdma_network_degradation"


def test_disaggregated_must_be_a_boolean(engine):
    with pytest.raises(Exception, match="context.disaggregated: expected bool, got 'yes'"):
        parse_snapshot({"context": {"disaggregated": "yes"}, "current": {}}, engine.kb, "test")


def test_running_batch_at_the_configured_cap_points_at_the_cap(engine):
    """Requests wait with the KV cache mostly free: a running batch pinned at --max-num-seqs says the cap holds
    them back; the same batch well under the cap does not."""
    now = {"requests_running": {"replica0": 8}, "requests_waiting": {"replica0": 40}, "kv_cache_usage": 0.2,
           "ttft_p50_s": 6.0}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "batching_underutilization")
    capped = _diagnose(engine, {**SERVING, "max_num_seqs": 8}, {}, now)
    roomy = _diagnose(engine, {**SERVING, "max_running_requests": 256}, {}, now)   # SGLang's name, same key
    unknown = _diagnose(engine, SERVING, {}, now)
    assert capped.observations["running_at_batch_cap"].present
    assert roomy.observations["running_at_batch_cap"].present is False
    assert "running_at_batch_cap" not in unknown.observations
    assert p(capped) > 2 * p(unknown) > 2 * p(roomy)
    cap = next(c for c in capped.ceilings if c.id == "running_batch_cap")
    assert (cap.value, cap.observed, cap.fraction_of_ceiling) == (8, 8, 1.0)


def test_a_cap_that_binds_before_memory_outweighs_a_load_surge(engine):
    """At the cap with requests waiting, a full KV cache says memory would stop admission anyway (a surge);
    a roomy one says the cap is what holds requests back. Both conditions of the finding must hold."""
    base = {"requests_running": {"replica0": 50}, "requests_waiting": {"replica0": 0}}
    def run(kv):
        now = {"requests_running": {"replica0": 50}, "requests_waiting": {"replica0": 200}, "kv_cache_usage": kv,
               "ttft_p50_s": 20.0, "queue_time_p50_s": 19.0}
        return _diagnose(engine, {**SERVING, "max_num_seqs": 50}, base, now)
    roomy, full = run(0.3), run(0.95)
    assert roomy.observations["running_at_cap_with_kv_room"].present
    assert full.observations["running_at_cap_with_kv_room"].present is False
    assert full.observations["running_at_batch_cap"].present
    assert roomy.hypotheses[0].id == "batching_underutilization"
    rank = lambda d, rc: [h.id for h in d.hypotheses].index(rc)
    assert rank(full, "batching_underutilization") > rank(roomy, "batching_underutilization")


def test_running_batch_above_its_cap_means_the_context_is_off(engine):
    now = {"requests_running": 60, "requests_waiting": 5}
    d = _diagnose(engine, {**SERVING, "max_num_seqs": 16}, {}, now)
    assert "running_at_batch_cap" not in d.observations
    assert any("running_batch_cap" in w and "the context is off" in w for w in d.warnings)


def test_max_num_seqs_must_be_a_positive_integer(engine):
    with pytest.raises(Exception, match="context.max_num_seqs"):
        parse_snapshot({"context": {"max_num_seqs": 0}, "current": {}}, engine.kb, "test")


def test_requests_missing_at_the_engines_point_in_front_of_them(engine):
    """512 clients in flight while the two engines hold 6 requests between them: the rest wait in front
    (gateway, proxy, API server). Engines holding all of them, or no running count, say nothing of the sort."""
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "gateway_saturation")
    now = {"requests_running": {"replica0": 3, "replica1": 3}, "requests_waiting": {"replica0": 0, "replica1": 0},
           "e2e_p50_s": 0.23}
    held = _diagnose(engine, {**SERVING, "concurrency": 512}, {}, now)   # alias of client_concurrency
    full = _diagnose(engine, {**SERVING, "client_concurrency": 6}, {}, now)
    no_running = _diagnose(engine, {**SERVING, "client_concurrency": 512}, {},
                           {k: v for k, v in now.items() if k != "requests_running"})
    assert held.observations["requests_held_before_engine"].present
    assert full.observations["requests_held_before_engine"].present is False
    assert "requests_held_before_engine" not in no_running.observations
    assert held.hypotheses[0].id == "gateway_saturation"
    assert p(held) > 3 * p(full)
    ceiling = next(c for c in held.ceilings if c.id == "client_inflight")
    assert (ceiling.value, ceiling.observed) == (512, 6)


def test_a_running_batch_far_below_the_clients_in_flight_points_at_a_cap_in_between(engine):
    """2048 requests in flight, a cap of 2048, 1000 running and no waiting count (Ray issue 47681): the rest wait
    in the engine's queue or in front of it, so the causes that hold requests back gain. A batch at its cap, a
    closed loop of one, or a known waiting count (engine_inflight_frac reads it instead) say nothing of the sort."""
    p = lambda d: sum(h.probability for h in d.hypotheses
                      if h.id in ("batching_underutilization", "gateway_saturation", "kv_cache_exhaustion"))
    ctx = {**SERVING, "max_num_seqs": 2048, "client_concurrency": 2048}
    below = _diagnose(engine, ctx, {}, {"requests_running": {"replica0": 1000}})
    even = _diagnose(engine, ctx, {}, {"requests_running": {"replica0": 1500}})
    at_cap = _diagnose(engine, {**ctx, "max_num_seqs": 1000}, {}, {"requests_running": {"replica0": 1000}})
    one = _diagnose(engine, {**SERVING, "client_concurrency": 1}, {}, {"requests_running": 0})
    waiting = _diagnose(engine, ctx, {}, {"requests_running": {"replica0": 1000}, "requests_waiting": {"replica0": 0}})
    assert below.observations["running_below_client_inflight"].present
    assert even.observations["running_below_client_inflight"].present is False
    assert at_cap.observations["running_below_client_inflight"].present is None
    assert one.observations["running_below_client_inflight"].present is None
    assert "running_below_client_inflight" not in waiting.observations
    assert waiting.observations["requests_held_before_engine"].present
    assert p(below) > 1.5 * p(even)
    ceiling = next(c for c in below.ceilings if c.id == "client_inflight_running")
    assert (ceiling.value, ceiling.observed) == (2048, 1000)


def test_calls_far_below_the_batch_cap_point_at_a_limit_in_front_of_the_engine(engine):
    """Ray PR 43840 / issue 47681: a batcher set to 2048 handed calls of 1000 (an actor's concurrency default
    caps them) runs under half its batch, so batching underutilization gains. Calls at the cap say the
    opposite, calls of a handful are engine_fed_small_calls' reading, and without a cap nothing is read."""
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "batching_underutilization")
    ctx = {**SERVING, "max_num_seqs": 2048}
    short = _diagnose(engine, ctx, {}, {"engine_call_batch": 1000})
    full = _diagnose(engine, ctx, {}, {"engine_call_batch": 2048})
    few = _diagnose(engine, ctx, {}, {"engine_call_batch": 4})
    uncapped = _diagnose(engine, SERVING, {}, {"engine_call_batch": 1000})
    assert short.observations["calls_below_batch_cap"].present
    assert full.observations["calls_below_batch_cap"].present is False
    assert few.observations["calls_below_batch_cap"].present is None
    assert few.observations["engine_fed_small_calls"].present
    assert "calls_below_batch_cap" not in uncapped.observations
    assert p(short) > 2 * p(full) and p(short) > 1.5 * p(uncapped)
    ceiling = next(c for c in short.ceilings if c.id == "call_batch_cap")
    assert (ceiling.value, ceiling.observed) == (2048, 1000)


def test_a_plateau_well_below_the_batch_cap_points_at_admission_not_load(engine):
    """SGLang issue 36889: 8 clients against a cap of 8, yet 2 running and 6 waiting, and throughput flat as the
    load rose. A surge fills the batch to its cap first; a plateau under half the cap is an admission limit
    (here the state cache), so KV exhaustion gains on load surge. At the cap the reading is absent."""
    p = lambda d, c: next(h.probability for h in d.hypotheses if h.id == c)
    ctx = {**SERVING, "max_num_seqs": 8, "client_concurrency": 8}
    base = {"output_tokens_per_s": 37.3, "requests_running": 1, "requests_waiting": 0}
    now = {"output_tokens_per_s": 47.3, "offered_load_ratio": 8, "load_scaling_gain": 1.08, "requests_waiting": 6}
    below = _diagnose(engine, ctx, base, {**now, "requests_running": 2})
    at_cap = _diagnose(engine, ctx, base, {**now, "requests_running": 8})
    assert below.observations["throughput_plateau_below_batch_cap"].present
    assert at_cap.observations["throughput_plateau_below_batch_cap"].present is False
    assert p(below, "kv_cache_exhaustion") > p(below, "load_surge")
    assert p(below, "kv_cache_exhaustion") / p(below, "load_surge") > \
        2 * p(at_cap, "kv_cache_exhaustion") / p(at_cap, "load_surge")


def test_engines_holding_more_than_the_clients_send_is_flagged(engine):
    d = _diagnose(engine, {**SERVING, "client_concurrency": 8}, {}, {"requests_running": 30, "requests_waiting": 10})
    assert "requests_held_before_engine" not in d.observations
    assert any("client_inflight" in w and "other traffic" in w for w in d.warnings)


def test_gpu_peer_access_missing_points_at_the_pcie_path(engine):
    """The same busbw shortfall on a PCIe box: with GPU peer-to-peer unavailable the PCIe path is the suspect."""
    base, now = {"nccl_busbw_gb_per_s": 20.0}, {"nccl_busbw_gb_per_s": 6.0}
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "RTX-4090"}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "pcie_link_degradation")
    off = _diagnose(engine, ctx, base, {**now, "gpu_p2p_ok": {"node0": False}})
    on = _diagnose(engine, ctx, base, {**now, "gpu_p2p_ok": {"node0": True}})
    unknown = _diagnose(engine, ctx, base, now)
    odds = lambda d: p(d) / (1 - p(d))
    assert off.hypotheses[0].id == "pcie_link_degradation"
    # odds: the catalog already says a 4090 box has no NVLink, so the unknown case starts well above even
    assert odds(off) > 3 * odds(unknown) and odds(unknown) > odds(on)


def test_a_long_tail_of_prompt_lengths_makes_head_of_line_blocking_likelier(engine):
    """TTFT P99 up with the median flat: a prompt P99 far above the mean (long prompts among short ones) is the
    mix head-of-line blocking needs; uniform prompt lengths make it less likely."""
    base = {"ttft_p50_s": 0.2, "ttft_p99_s": 0.5, "prompt_tokens_mean": 900}
    now = {"ttft_p50_s": 0.22, "ttft_p99_s": 4.0, "prompt_tokens_mean": 1000}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "head_of_line_blocking")
    mixed = _diagnose(engine, SERVING, base, {**now, "prompt_tokens_p99": 30000})
    uniform = _diagnose(engine, SERVING, base, {**now, "prompt_tokens_p99": 1800})
    assert mixed.observations["prompt_lengths_mixed"].present
    assert uniform.observations["prompt_lengths_mixed"].present is False
    assert mixed.hypotheses[0].id == "head_of_line_blocking"
    assert p(mixed) > 1.5 * p(uniform)


def test_slower_steps_with_much_less_memory_in_use_point_at_a_training_setting(engine):
    """Step time up 40% while peak device memory falls by half: the memory/time trade of a setting
    (activation checkpointing, finer sharding, smaller micro-batch), not a slower GPU."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    base = {"step_time_s": 1.0, "fb_used_frac": {"gpu0": 0.9}}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "training_config_regression")
    less = _diagnose(engine, ctx, base, {"step_time_s": 1.4, "fb_used_frac": {"gpu0": 0.45}})
    same = _diagnose(engine, ctx, base, {"step_time_s": 1.4, "fb_used_frac": {"gpu0": 0.88}})
    assert less.observations["vram_use_down"].present and same.observations["vram_use_down"].present is False
    assert less.hypotheses[0].id == "training_config_regression"
    assert p(less) > 2 * p(same)


@pytest.mark.parametrize("setting, before, after, finding", [
    ("activation_checkpointing", False, True, "checkpointing_turned_on"),
    ("micro_batch_size", 8, 2, "micro_batch_down"),
    ("sharding_strategy", "zero2", "zero3", "sharding_changed"),
    ("compute_dtype", "bf16", "fp32", "precision_left_bf16"),
    ("cpu_offload", False, True, "offload_turned_on"),
])
def test_a_changed_training_setting_points_at_the_config(engine, setting, before, after, finding):
    """The same slower step with the two runs' settings known: the changed setting names the config as the cause;
    the same setting unchanged counts against it."""
    context = {"workload": "training", "nodes": 4, "gpus_per_node": 8}
    base, now = {"step_time_s": 1.0, "comm_time_frac": 0.2}, {"step_time_s": 1.4, "comm_time_frac": 0.3}
    changed = _diagnose(engine, context, {**base, setting: before}, {**now, setting: after})
    same = _diagnose(engine, context, {**base, setting: before}, {**now, setting: before})
    assert changed.observations[finding].present and same.observations[finding].present is False
    assert changed.hypotheses[0].id == "training_config_regression"
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "training_config_regression")
    assert p(changed) > 2 * p(same)


@pytest.mark.parametrize("gpu, gen, expected", [("A100-80GB", 3, True), ("A100-80GB", 4, False),
                                                  ("H100-SXM", 4, True), (None, 1, True), (None, 3, False)])
def test_every_link_below_the_gpus_generation_is_found_without_a_peer_or_baseline(engine, gpu, gen, expected):
    """All eight links at the same lower generation (a BIOS setting, a riser): no peer stands out, yet the catalog
    says what the GPU supports (Gen1/Gen2 under load is below any datacenter GPU since 2016)."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 8, **({"gpu": gpu} if gpu else {})}
    now = {"comm_time_frac": 0.6, "pcie_link_gen": {f"gpu{i}": gen for i in range(8)}}
    d = _diagnose(engine, ctx, {}, now)
    found = d.observations.get("pcie_gen_below_spec") or d.observations.get("pcie_gen_legacy")
    present = any(d.observations[f].present for f in ("pcie_gen_below_spec", "pcie_gen_legacy") if f in d.observations)
    assert found is not None and present is expected
    assert not d.observations["pcie_gen_gpu_low"].present
    rank = [h.id for h in d.hypotheses].index("pcie_link_degradation")
    assert (rank < 3) is expected


@pytest.mark.parametrize("cpu, expected", [(0.95, True), (0.86, None), (0.7, False)])
def test_state_just_short_of_its_bound_is_marginal(engine, cpu, expected):
    # host_cpu_high fires above 0.9; within 10% below the bound it is too close to call, not absent
    d = _diagnose(engine, {"workload": "training"}, {}, {"host_cpu_util": {"node0": cpu}})
    assert d.observations["host_cpu_high"].present is expected


@pytest.mark.parametrize("running, expected", [({"r0": 60, "r1": 20}, True), ({"r0": 60, "r1": 40}, None),
                                               ({"r0": 60, "r1": 55}, False)])
def test_moderate_spread_across_replicas_is_marginal(engine, running, expected):
    # running_uneven needs a 50% spread; 33% is neither an even load nor a clear imbalance
    d = _diagnose(engine, SERVING, {}, {"requests_running": running})
    assert d.observations["running_uneven"].present is expected
    assert ("running_uneven" in engine.evidence(d.observations)) is (expected is not None)


def _p(d, cause):
    return next(h.probability for h in d.hypotheses if h.id == cause)


def test_long_prompts_without_baseline_point_at_prefill(engine):
    """No before-state: 30k-token prompts are themselves evidence for the prefill-side causes."""
    short = _diagnose(engine, SERVING, {}, {"prompt_tokens_mean": 500, "ttft_p50_s": 8.0})
    long = _diagnose(engine, SERVING, {}, {"prompt_tokens_mean": 30000, "ttft_p50_s": 8.0})
    assert long.observations["prompt_tokens_long"].present and not short.observations["prompt_tokens_long"].present
    for cause in ("prefill_compute_bound", "head_of_line_blocking", "kv_cache_exhaustion"):
        assert _p(long, cause) > _p(short, cause)
    # long prompts now are not growth: that needs a before-state
    assert _p(long, "prompt_length_growth") == pytest.approx(_p(short, "prompt_length_growth"), abs=0.01)
    # prompts that were just as long in the good state say nothing about what changed
    same = _diagnose(engine, SERVING, {"prompt_tokens_mean": 30000}, {"prompt_tokens_mean": 30000, "ttft_p50_s": 8.0})
    assert same.observations["prompt_tokens_long"].present is None


def test_no_prefix_hits_on_long_prompts_points_at_the_prefix_cache(engine):
    now = {"prompt_tokens_mean": 50000, "ttft_p50_s": 6.0, "prefix_cache_hit_rate": 0.0}
    cold = _diagnose(engine, SERVING, {}, now)
    warm = _diagnose(engine, SERVING, {}, {**now, "prefix_cache_hit_rate": 0.9})
    assert cold.observations["prefix_hits_near_zero_long_prompts"].present
    assert cold.hypotheses[0].id == "prefix_cache_degradation"
    assert _p(cold, "prefix_cache_degradation") > 2 * _p(warm, "prefix_cache_degradation")
    # short prompts (a classifier, embeddings) rarely share prefixes: no hits there is no evidence
    short = _diagnose(engine, SERVING, {}, {**now, "prompt_tokens_mean": 300})
    assert short.observations["prefix_hits_near_zero_long_prompts"].present is False


def test_p2p_forced_over_the_cpu_root_complex_points_at_pcie(engine):
    """GPUs that meet only at the CPU (NODE in topo -m) with peer-to-peer forced on: the PCIe path is the suspect."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 4}
    now = {"nccl_busbw_gb_per_s": 2, "gpu_pair_paths": {"node0": ["NODE"]}}
    forced = _diagnose(engine, ctx, {"nccl_busbw_gb_per_s": 18}, {**now, "gpu_p2p_ok": {"node0": True}})
    off = _diagnose(engine, ctx, {"nccl_busbw_gb_per_s": 18}, {**now, "gpu_p2p_ok": {"node0": False}})
    obs = forced.observations["p2p_forced_through_cpu"]
    assert obs.present and "gpu_p2p_ok is true" in obs.detail
    assert off.observations["p2p_forced_through_cpu"].present is False
    assert forced.hypotheses[0].id == "pcie_link_degradation"


def test_a_few_requests_waiting_very_long_points_at_head_of_line_blocking(engine):
    """Queue P50 0.2 s, P99 40 s: most requests pass, a few wait behind big work (not an overload, where all wait)."""
    now = {"ttft_p50_s": 0.7, "ttft_p99_s": 42.0, "queue_time_p50_s": 0.2, "requests_waiting": 6}
    tail = _diagnose(engine, SERVING, {}, {**now, "queue_time_p99_s": 40.0})
    flat = _diagnose(engine, SERVING, {}, {**now, "queue_time_p99_s": 0.6})
    assert tail.observations["queue_tail_widened"].present
    assert flat.observations["queue_tail_widened"].present is False
    assert _p(tail, "head_of_line_blocking") > _p(flat, "head_of_line_blocking")
    assert _p(tail, "head_of_line_blocking") > _p(tail, "load_surge")
    # everyone waits longer under overload: P50 and P99 grew together, so the tail did not widen
    both = _diagnose(engine, SERVING, {"queue_time_p50_s": 0.1, "queue_time_p99_s": 1.0},
                     {"queue_time_p50_s": 4.0, "queue_time_p99_s": 30.0})
    assert both.observations["queue_tail_widened"].present is False


ONE_AT_A_TIME = {"ttft_p50_s": 0.3, "ttft_p99_s": 3.0, "prompt_tokens_mean": 900, "prompt_tokens_p99": 5000}


@pytest.mark.parametrize("running, waiting, overlap", [(1, 0, False), (1, 1, True), (2, 0, True),
                                                      ({"r0": 1, "r1": 3}, {"r0": 0, "r1": 0}, True)])
def test_requests_in_flight_say_whether_requests_overlap(engine, running, waiting, overlap):
    d = _diagnose(engine, SERVING, {}, {**ONE_AT_A_TIME, "requests_running": running, "requests_waiting": waiting})
    assert d.observations["requests_overlap"].present is overlap


def test_one_request_at_a_time_cannot_queue_or_block(engine):
    """A client that waits for each answer keeps one request in flight: nothing can wait behind anything."""
    alone = _diagnose(engine, SERVING, {}, {**ONE_AT_A_TIME, "requests_running": 1, "requests_waiting": 0})
    two = _diagnose(engine, SERVING, {}, {**ONE_AT_A_TIME, "requests_running": 2, "requests_waiting": 0})
    for cause in ("head_of_line_blocking", "load_surge", "kv_cache_exhaustion", "batching_underutilization"):
        assert _p(alone, cause) < 0.7 * _p(two, cause)   # an absence is tempered (ABSENT_EVIDENCE_WEIGHT)
    assert _p(alone, "prompt_length_growth") > _p(two, "prompt_length_growth")
    unmeasured = _diagnose(engine, SERVING, {}, {**ONE_AT_A_TIME, "requests_running": 1})
    assert "requests_overlap" not in engine.evidence(unmeasured.observations)


def test_low_clocks_on_an_idle_gpu_are_not_throttling(engine):
    """Clocks fall to idle when nothing runs (event reason Idle); only a busy GPU's low clocks point at throttling."""
    ctx = {"workload": "inference", "nodes": 1, "gpus_per_node": 2}
    base = {"sm_clock_mhz": {"gpu0": 1900, "gpu1": 1900}, "output_tokens_per_s": 34}
    now = {"sm_clock_mhz": {"gpu0": 405, "gpu1": 400}, "output_tokens_per_s": 6}
    idle = _diagnose(engine, ctx, base, {**now, "gpu_util": {"gpu0": 0.1, "gpu1": 0.1}})
    busy = _diagnose(engine, ctx, base, {**now, "gpu_util": {"gpu0": 0.95, "gpu1": 0.95}})
    unknown = _diagnose(engine, ctx, base, now)
    assert idle.observations["sm_clock_down"].present is None
    assert busy.observations["sm_clock_down"].present and unknown.observations["sm_clock_down"].present
    assert _p(busy, "gpu_throttling") > 0.5 > _p(idle, "gpu_throttling")


def test_host_cpu_doubling_is_evidence_of_work_moved_to_the_host(engine):
    """GPU util down while host CPU climbs 0.05 -> 0.35: layers or the optimizer now run on the host."""
    ctx = {"workload": "inference", "nodes": 1, "gpus_per_node": 1}
    base = {"output_tokens_per_s": 36, "gpu_util": {"gpu0": 0.95}, "host_cpu_util": {"node0": 0.05}}
    moved = _diagnose(engine, ctx, base, {"output_tokens_per_s": 22, "gpu_util": {"gpu0": 0.6},
                                          "host_cpu_util": {"node0": 0.35}})
    same = _diagnose(engine, ctx, base, {"output_tokens_per_s": 22, "gpu_util": {"gpu0": 0.6},
                                         "host_cpu_util": {"node0": 0.06}})
    assert moved.observations["host_cpu_up"].present and same.observations["host_cpu_up"].present is False
    assert _p(moved, "memory_pressure") > _p(same, "memory_pressure")
    # doubling from 2% to 5% is noise, not work moving
    tiny = _diagnose(engine, ctx, {"host_cpu_util": {"node0": 0.02}}, {"host_cpu_util": {"node0": 0.05}})
    assert tiny.observations["host_cpu_up"].present is False


def test_miss_rate_rising_from_zero_is_a_rise(engine):
    """Every prompt token hit the cache before (hit rate 1.0): a fall to 0.6 is read, not lost as 'no scale'."""
    d = _diagnose(engine, SERVING, {"prefix_cache_hit_rate": 1.0}, {"prefix_cache_hit_rate": 0.6})
    assert d.observations["prefix_hit_rate_down"].present
    tiny = _diagnose(engine, SERVING, {"prefix_cache_hit_rate": 0.999}, {"prefix_cache_hit_rate": 0.996})
    assert tiny.observations["prefix_hit_rate_down"].present is False   # 0.1% -> 0.4% misses: below resolution


def test_near_zero_hits_stand_in_only_for_a_missing_baseline(engine):
    """With a before-state the fall itself is the evidence; the near-zero state would count it twice."""
    now = {"prompt_tokens_mean": 50000, "prefix_cache_hit_rate": 0.0}
    assert _diagnose(engine, SERVING, {}, now).observations["prefix_hits_near_zero_long_prompts"].present
    with_base = _diagnose(engine, SERVING, {"prefix_cache_hit_rate": 0.9}, now)
    assert "prefix_hits_near_zero_long_prompts" not in with_base.observations
    assert with_base.observations["prefix_hit_rate_down"].present


def test_a_version_regression_needs_a_before_state(engine):
    """The same low-utilization training snapshot: with no baseline and no change list a version regression
    cannot be shown, so it ranks lower than with a measured before-state or a listed upgrade."""
    now = {"step_time_s": 2.0, "gpu_util": 0.3, "comm_time_frac": 0.5}
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "software_version_regression")
    context = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    nothing_before = _diagnose(engine, context, None, now)
    measured_before = _diagnose(engine, context, {"step_time_s": 1.0, "gpu_util": 0.3, "comm_time_frac": 0.5}, now)
    snap = parse_snapshot({"context": context, "changes": ["framework_upgrade"], "current": now}, engine.kb, "test")
    upgrade_listed = engine.diagnose(snap, with_probes=False)
    assert p(nothing_before) < 0.5 * p(upgrade_listed)
    assert p(nothing_before) < p(measured_before)
    said = lambda d: any("neither a baseline nor a change list" in w and "software_version_regression" in w
                         for w in d.warnings)
    assert said(nothing_before) and not said(measured_before) and not said(upgrade_listed)
    prior = engine.priors(context, before_known=False)[engine.net.causes.index("software_version_regression")]
    assert prior == pytest.approx(0.2 * engine.priors(context)[engine.net.causes.index("software_version_regression")])


def test_another_engine_on_the_same_load_stands_in_for_the_before_state(engine):
    """lmdeploy issue 1608: one engine decodes a 200k-token prompt at twice another's ITL on the same GPU, with no
    baseline or change list. The A/B across engines shows the slow engine's code is the difference, so a version
    regression is not ranked down for a missing before-state; the other engine being as slow is a reading too."""
    ctx = {"workload": "inference", "gpu": "H800", "nodes": 1, "gpus_per_node": 1}
    now = {"itl_p50_s": 0.063, "prompt_tokens_mean": 204790, "requests_running": 1}
    i = engine.net.causes.index("software_version_regression")
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "software_version_regression")
    said = lambda d: any("neither a baseline nor a change list" in w and "software_version_regression" in w
                         for w in d.warnings)
    alone = _diagnose(engine, ctx, None, now)
    other_fast = _diagnose(engine, ctx, None, {**now, "other_engine_same_load": True})
    other_slow = _diagnose(engine, ctx, None, {**now, "other_engine_same_load": False})
    assert said(alone) and not said(other_fast)
    assert p(other_fast) > 3 * p(alone) and p(other_fast) > p(other_slow)
    assert engine.priors(ctx, before_known=False, readings=frozenset({"other_engine_same_load"}))[i] == \
        pytest.approx(engine.priors(ctx)[i])


def test_another_training_framework_fast_on_the_same_load_points_at_settings(engine):
    """tinker-cloud PR 33: one trainer ran a Qwen3-8B stream at 103 s/step, one sample per micro-batch, where verl
    ran it in 23.7 s. With no baseline, the other framework's run is the comparison: a training setting is not
    ranked down for a missing before-state, and the fast framework raises it."""
    ctx = {"workload": "training", "gpu": "H200", "nodes": 1, "gpus_per_node": 2, "tp": 2}
    now = {"step_time_s": 103, "micro_batch_size": 1}
    i = engine.net.causes.index("training_config_regression")
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "training_config_regression")
    alone = _diagnose(engine, ctx, None, now)
    other_fast = _diagnose(engine, ctx, None, {**now, "other_engine_same_load": True})
    assert p(other_fast) > 2 * p(alone)
    assert engine.priors(ctx, before_known=False, readings=frozenset({"other_engine_same_load"}))[i] == \
        pytest.approx(engine.priors(ctx)[i])


def test_an_idle_gpu_at_gen1_is_power_saving_not_a_degraded_link(engine):
    """nvidia-smi reports a lower current PCIe generation while the GPU is idle; only a busy GPU's reading counts."""
    context = {"workload": "training", "nodes": 1, "gpus_per_node": 2, "gpu": "H100-SXM"}
    gen1 = {"pcie_link_gen": {"gpu0": 1, "gpu1": 1}, "step_time_s": 2.0}
    idle = _diagnose(engine, context, None, {**gen1, "gpu_util": {"gpu0": 0.0, "gpu1": 0.01}})
    busy = _diagnose(engine, context, None, {**gen1, "gpu_util": {"gpu0": 0.6, "gpu1": 0.6}})
    for finding in ("pcie_gen_legacy", "pcie_gen_below_spec"):
        assert idle.observations[finding].present is None
        assert busy.observations[finding].present is True


@pytest.mark.parametrize("idle, rank_low, uneven", [
    ({"rank0": 0.45, "rank1": 0.44, "rank2": 0.45, "rank3": 0.02}, True, True),    # three wait for rank3
    ({"rank0": 0.4, "rank1": 0.1, "rank2": 0.35, "rank3": 0.25, "rank4": 0.45}, False, True),   # unequal work
    ({"rank0": 0.4, "rank1": 0.38, "rank2": 0.41, "rank3": 0.39}, False, False),   # all idle alike
    ({"rank0": 0.04, "rank1": 0.04, "rank2": 0.1, "rank3": 0.1}, None, None),   # all busy: spread means nothing, not read
])
def test_idle_share_read_across_ranks(engine, idle, rank_low, uneven):
    """Per-rank GPU idle shares are compared like collective wait: the rank far below its peers is the one they
    wait for, and a wide spread is ranks given unequal work; both mean 'while ranks idle', so neither holds
    while every rank is busy."""
    d = _diagnose(engine, {"workload": "training", "nodes": 1, "gpus_per_node": 8}, {"step_time_s": 1.0},
                  {"step_time_s": 1.5, "gpu_idle_frac": idle})
    assert d.observations["gpu_idle_rank_low"].present is rank_low
    assert d.observations["gpu_idle_uneven"].present is uneven
    if uneven and not rank_low:
        assert [h.id for h in d.hypotheses].index("load_imbalance") == 0


def test_engine_settings_of_both_states(engine):
    """Prefix caching switched off since the baseline names the cache; chunked prefill off makes a long
    prefill hold every other request, so it raises head-of-line blocking over the same evidence with it on."""
    base = {"ttft_p50_s": 0.3, "ttft_p99_s": 1.0, "prompt_tokens_mean": 3000}
    now = {"ttft_p50_s": 0.9, "ttft_p99_s": 4.0, "prompt_tokens_mean": 3000}
    off = _diagnose(engine, SERVING, {**base, "prefix_caching": True}, {**now, "prefix_caching": False})
    on = _diagnose(engine, SERVING, {**base, "prefix_caching": True}, {**now, "prefix_caching": True})
    assert off.observations["prefix_caching_turned_off"].present and not on.observations["prefix_caching_turned_off"].present
    assert off.hypotheses[0].id == "prefix_cache_degradation"
    assert _p(off, "prefix_cache_degradation") > 2 * _p(on, "prefix_cache_degradation")
    chunked = lambda v: _diagnose(engine, SERVING, base, {**now, "requests_waiting": 6, "chunked_prefill": v})
    assert _p(chunked(False), "head_of_line_blocking") > _p(chunked(True), "head_of_line_blocking")


@pytest.mark.parametrize("site, cause", [("numa_balancing", "numa_affinity_misconfig"),
                                         ("dataloader", "input_pipeline_stall"),
                                         ("host_code", "host_cpu_bottleneck")])
def test_where_the_slow_thread_waits(engine, site, cause):
    """A stack sample of the slow rank names where its time goes; each place raises the causes that put time
    there over the same slowdown sampled inside a collective."""
    ctx = {"workload": "training", "nodes": 2, "gpus_per_node": 8}
    here = _diagnose(engine, ctx, {"step_time_s": 1.0}, {"step_time_s": 1.5, "stall_site": site})
    there = _diagnose(engine, ctx, {"step_time_s": 1.0}, {"step_time_s": 1.5, "stall_site": "collective"})
    assert _p(here, cause) > 1.5 * _p(there, cause)


@pytest.mark.parametrize("gpu_util, idle_side", [(0.4, True), (0.95, False)])
def test_where_the_throughput_plateau_sits_against_the_gpus(engine, gpu_util, idle_side):
    """Doubling the clients adds no throughput. With the GPUs at 40% the cap is in front of them (batch cap,
    host CPU, gateway); with them at 95% it is their capacity (a load surge beyond it)."""
    now = {"gpu_util": {"gpu0": gpu_util}, "load_scaling_gain": 1.02, "requests_waiting": 20}
    d = _diagnose(engine, SERVING, {"requests_waiting": 0}, now)
    assert d.observations["throughput_plateau_gpu_idle"].present is idle_side
    assert d.observations["throughput_plateau_gpu_busy"].present is (not idle_side)
    front = max(_p(d, c) for c in ("batching_underutilization", "host_cpu_bottleneck", "gateway_saturation"))
    assert (front > _p(d, "load_surge")) is idle_side


@pytest.mark.parametrize("hotspot, cause", [(["tokenize_template"], "host_cpu_bottleneck"),
                                            (["stream_proxy"], "gateway_saturation"),
                                            (["media_decode"], "input_pipeline_stall")])
def test_what_the_busiest_host_thread_does(engine, hotspot, cause):
    """A profile of the hottest host thread tells the engine's CPU path, a proxy in front and the data
    loader apart; each raises its own cause over the same slowdown with the hot work unknown."""
    ctx = {"workload": "training" if cause == "input_pipeline_stall" else "inference", "nodes": 1, "gpus_per_node": 8}
    signal = "step_time_s" if cause == "input_pipeline_stall" else "ttft_p50_s"
    known = _diagnose(engine, ctx, {signal: 1.0}, {signal: 2.0, "host_hotspot": hotspot})
    unknown = _diagnose(engine, ctx, {signal: 1.0}, {signal: 2.0})
    assert _p(known, cause) > 2 * _p(unknown, cause)


def _reading_effect(engine, context, baseline, current, signal, value, other, finding, changes=None):
    """The same evidence diagnosed with `signal` at `value` and at `other`; `finding` must hold for the first
    reading and not for the second. Returns both diagnoses."""
    def run(v):
        data = {"context": context, "baseline": baseline, "current": {**current, signal: v}}
        if changes is not None:
            data["changes"] = changes
        return engine.diagnose(parse_snapshot(data, engine.kb, "test"), with_probes=False)
    with_it, without = run(value), run(other)
    # a finding whose absence rules nothing out (absent_unknown) reads as unknown for the other value
    absent = None if engine.kb.findings[finding].rule.absent_unknown else False
    assert with_it.observations[finding].present and without.observations[finding].present is absent
    return with_it, without


TRAINING_1 = {"workload": "training", "nodes": 1, "gpus_per_node": 1}
DISAGG = {"workload": "inference", "nodes": 2, "gpus_per_node": 8, "engine": "vllm", "disaggregated": True}

# Each row: a reading that incident reports state, the finding it gives, the cause it names (first, and
# `factor` times likelier than over the same evidence with the other reading). Sources are in kb/signals.
READINGS = {
    # `ollama ps` 42%/58% CPU/GPU: weights that did not fit run from host memory, not a busy host CPU
    "model_partly_on_cpu": ({"workload": "inference", "engine": "ollama", "gpus": 1}, None, {},
                            {"gpu_util": {"gpu0": 0.05}, "host_cpu_util": {"node0": 0.8}},
                            "model_on_cpu_frac", 0.42, 0.0, "memory_pressure", 3),
    # every link reports up, yet one GPU's links keep retraining (DCGM recovery counter)
    "nvlink_recovering": ({"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "H100-SXM"}, None,
                          {"step_time_s": 1.0}, {"step_time_s": 2.0, "nvlink_active_links": {f"gpu{i}": 18 for i in range(4)}},
                          "nvlink_error_rate", {"gpu0": 0, "gpu1": 0.5, "gpu2": 0, "gpu3": 0}, {f"gpu{i}": 0 for i in range(4)},
                          "nvlink_degradation", 5),
    # num_workers=0 with steps waiting on data, against eight workers
    "dataloader_in_main_process": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.6, "dataloader_wait_frac": 0.3},
                                   "dataloader_workers", 0, 8, "input_pipeline_stall", 1),
    # ITL P99 jumps and the step log shows the slow steps carry prefill tokens; decode-only stalls count against
    "decode_stalls_align_with_prefill": (SERVING, None, {"itl_p50_s": 0.02, "itl_p99_s": 0.04},
                                         {"itl_p50_s": 0.021, "itl_p99_s": 0.9},
                                         "decode_stalls_with_prefill", True, False, "head_of_line_blocking", 2),
    # gradient accumulation that all-reduces on every micro-step: four collectives per step where there was one
    "collectives_per_step_up": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None,
                                {"step_time_s": 1.0, "comm_time_frac": 0.15, "collectives_per_step": 1},
                                {"step_time_s": 1.6, "comm_time_frac": 0.4},
                                "collectives_per_step", 4, 1, "training_config_regression", 2),
    # 5xx the gateway produced itself (circuit breaker overflow), against 5xx the engines returned
    "gateway_own_errors": (SERVING, None, {"e2e_p50_s": 1.0, "http_5xx_rate": 0.0}, {"e2e_p50_s": 1.4, "http_5xx_rate": 0.2},
                           "gateway_error_frac", 0.2, 0.0, "gateway_saturation", 2),
    # thirteen busy threads per usable core (pools sized for the host) while the host CPU looks moderate
    "cpu_threads_oversubscribed": ({"workload": "inference", "nodes": 1, "gpus": 2, "engine": "sglang"}, None, {},
                                   {"gpu_util": {"gpu0": 0.7, "gpu1": 0.7}, "host_cpu_util": {"node0": 0.6}},
                                   "cpu_threads_per_core", 13.1, 1.0, "host_cpu_bottleneck", 3),
    # after a driver update, ten times slower with no error and 6 GB of shared GPU memory in use
    "gpu_memory_spills_to_host": (TRAINING_1, ["driver_upgrade"], {"step_time_s": 1.0}, {"step_time_s": 10.0},
                                  "gpu_memory_spilled_gb", 6.0, 0.0, "memory_pressure", 2),
    # --enforce-eager on a one-GPU server whose GPU idles half the time: kernels launched one by one from Python
    "cuda_graphs_off": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {},
                        {"gpu_util": {"gpu0": 0.45}, "itl_p50_s": 0.03, "host_cpu_util": {"node0": 0.3}},
                        "cuda_graphs", False, True, "host_cpu_bottleneck", 2),
    # steps slow more the longer the job runs (a restart helps) with device memory nearly full
    "slowdown_worsening": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.8, "fb_used_frac": {"gpu0": 0.96}},
                           "slowdown_pattern", "worsening", "steady", "memory_pressure", 2),
    # fast for the first minutes, then a lower plateau on a hot GPU (heat soak)
    "slowdown_after_start": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.4, "temp_c": {"gpu0": 84}},
                             "slowdown_pattern", "drop_after_start", "steady", "gpu_throttling", 2),
    # P/D serving whose TTFT grew, with the KV connector on UCX's TCP fallback instead of RDMA
    "kv_transfer_over_tcp": ({"workload": "inference", "nodes": 2, "gpus_per_node": 8, "engine": "vllm", "disaggregated": True},
                             None, {"ttft_p50_s": 0.3}, {"ttft_p50_s": 2.5},
                             "kv_transfer_transport", "tcp", "rdma", "kv_transfer_bottleneck", 2),
    # one replica's GPU busy and three idle behind a session-hash router, against a least-load one
    "routing_blind_to_load": ({"workload": "inference", "replicas": 4, "engine": "vllm", "gateway": "envoy"}, None,
                              {"ttft_p99_s": 0.5, "gpu_util": {f"gpu{i}": 0.9 for i in range(4)}},
                              {"ttft_p99_s": 4.0, "gpu_util": {"gpu0": 0.95, "gpu1": 0.3, "gpu2": 0.35, "gpu3": 0.4}},
                              "routing_policy", ["session_hash"], ["least_load"], "load_imbalance", 2),
    # a load sweep that stops gaining while the running batch sits at max_num_seqs and requests queue
    "throughput_plateau_at_batch_cap": ({"workload": "inference", "gpus": 1, "engine": "tensorrt-llm", "max_num_seqs": 8},
                                        None, {}, {"requests_running": 8, "requests_waiting": 6, "gpu_util": {"gpu0": 0.8},
                                                   "ttft_p99_s": 3.0},
                                        "load_scaling_gain", 1.0, 1.9, "batching_underutilization", 2),
    # preemptions began and the step log shows the slow decode steps carry (recomputed) prefill
    "decode_stalls_align_with_prefill:preemptions": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None,
                                         {"itl_p99_s": 0.05, "preemptions_per_s": 0}, {"itl_p99_s": 0.9, "preemptions_per_s": 0.3},
                                         "decode_stalls_with_prefill", True, False, "kv_cache_exhaustion", 1.5),
    # the TTFT tail and the queue grew with twice the clients, against a rerun of the same benchmark
    "offered_load_up": (SERVING, None, {"ttft_p99_s": 0.5, "requests_waiting": 2}, {"ttft_p99_s": 3.0, "requests_waiting": 40},
                        "offered_load_ratio", 2.0, 1.0, "load_surge", 3),
    # a scheduler change moved the router from session affinity to round robin, and the TTFT tail grew
    "routing_lost_session_affinity": ({"workload": "inference", "engine": "sglang", "client_concurrency": 64},
                                      ["scheduler_config"],
                                      {"ttft_p99_s": 6.8, "routing_policy": ["session_hash"], "prefix_caching": True},
                                      {"ttft_p99_s": 27.5, "prefix_caching": True},
                                      "routing_policy", ["round_robin"], ["session_hash"], "prefix_cache_degradation", 2),
    # ITL doubled on a busy GPU; stopping the other tenant of the GPU brought the speed back
    "isolation_restored_speed": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"itl_p50_s": 0.02},
                                 {"itl_p50_s": 0.045, "gpu_util": {"gpu0": 0.95}},
                                 "isolation_restores", True, False, "noisy_neighbor", 2),
    # latency tripled behind a proxy whose CPU idles while every pooled connection is in use
    "gateway_at_inflight_cap": (SERVING, None, {"e2e_p50_s": 1.0}, {"e2e_p50_s": 3.0, "gateway_cpu_util": 0.15},
                                "gateway_inflight_cap_frac", 1.0, 0.3, "gateway_saturation", 2),
    # the TTFT tail grew, and short requests wait 40x their own TTFT in the mixed load
    "short_requests_wait_for_others": (SERVING, None, {"ttft_p99_s": 0.5}, {"ttft_p99_s": 4.0},
                                       "short_request_ttft_ratio", 40, 1.2, "head_of_line_blocking", 1.5),
    # TP4 decode on PCIe-only GPUs got slower, and the engine's start-up log says it refused its custom all-reduce
    "custom_allreduce_off": ({"workload": "inference", "gpus": 4, "tp": 4, "engine": "sglang"}, None,
                             {"itl_p50_s": 0.03}, {"itl_p50_s": 0.06, "gpu_util": {f"gpu{i}": 0.6 for i in range(4)}},
                             "custom_allreduce", False, True, "tensor_parallel_comm", 1.5),
    # ITL up on a GPU that reads busy, yet a trace shows it idle between steps half the time, waiting for the host
    "gpu_waits_on_host": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"itl_p50_s": 0.02},
                          {"itl_p50_s": 0.04, "gpu_util": {"gpu0": 0.9}},
                          "gpu_wait_on_host_frac", 0.5, 0.05, "host_cpu_bottleneck", 2),
    # ten times slower on a card with 8 GB free for a model that needs 14
    "memory_demand_exceeds_gpu": ({"workload": "inference", "gpus": 1, "engine": "ollama"}, None, {"itl_p50_s": 0.03},
                                  {"itl_p50_s": 0.3}, "gpu_memory_demand_frac", 1.75, 0.6, "memory_pressure", 2),
    # tail latency tripled behind a proxy; the same benchmark against the engine's own port is fast
    "bypass_restored_speed": ({"workload": "inference", "engine": "vllm", "gateway": "envoy"}, None,
                              {"e2e_p99_s": 1.0}, {"e2e_p99_s": 3.0}, "bypass_restores", True, False,
                              "gateway_saturation", 2),
    # ITL rose with speculation on; the same load decodes faster with it off
    "speculation_slower_than_plain": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"itl_p50_s": 0.02},
                                      {"itl_p50_s": 0.03, "spec_decode_acceptance_rate": 0.8},
                                      "spec_decode_speedup", 0.7, 1.6, "speculative_decoding_regression", 2),
    # steps slowed on one 8-GPU server, cool and unthrottled; replacing one GPU brought the speed back
    "hardware_swap_restored_speed": ({"workload": "training", "nodes": 1, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                                     {"step_time_s": 1.4, "throttle_reasons": {f"gpu{i}": [] for i in range(8)},
                                      "temp_c": {f"gpu{i}": 60 for i in range(8)}},
                                     "hardware_swap_restores", True, False, "gpu_hardware_fault", 2),
    # steps wait on data read from a network filesystem; the same shard copied to local NVMe is fast
    "fast_storage_restored_speed": (TRAINING_1, None, {"step_time_s": 0.5},
                                    {"step_time_s": 1.5, "dataloader_wait_frac": 0.6},
                                    "fast_storage_restores", True, False, "storage_io_bottleneck", 2),
    # steps slowed across four nodes; ibstat shows one node's port trained to 100G while its peers run at 200G
    "ib_port_rate_below_peers": ({"workload": "training", "nodes": 4, "gpus_per_node": 8, "rdma": True}, None,
                                 {"step_time_s": 1.0}, {"step_time_s": 1.4}, "ib_port_rate_gbit_per_s",
                                 {"node1/mlx5_0": 200, "node2/mlx5_0": 200, "node3/mlx5_0": 100, "node4/mlx5_0": 200},
                                 {f"node{i}/mlx5_0": 200 for i in range(1, 5)}, "rdma_network_degradation", 2),
    # the communication share grew; HYBRID_SHARD (less traffic between nodes, same work per GPU) restored the speed
    "comm_reduction_restored_speed": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None,
                                      {"step_time_s": 1.0, "comm_time_frac": 0.15}, {"step_time_s": 1.6, "comm_time_frac": 0.45},
                                      "comm_reduction_restores", True, False, "scale_out_comm_bound", 1.5),
    # steps wait on data; the dataset is read from an NFS share rather than local NVMe
    "data_on_shared_storage": (TRAINING_1, None, {"step_time_s": 0.5}, {"step_time_s": 1.5, "dataloader_wait_frac": 0.6},
                               "data_storage", ["network_fs"], ["local_nvme"], "storage_io_bottleneck", 1.5),
    # no baseline: the TTFT tail is long and the clients offer 1.5x the rate a load test saturates at
    "load_above_capacity": (SERVING, None, {}, {"ttft_p99_s": 8.0, "requests_waiting": 40},
                            "offered_load_over_capacity", 1.5, 0.4, "load_surge", 1.5),
    # steps slowed; the backward now takes far longer than the forward, which did not change
    "backward_forward_ratio_up": (TRAINING_1, None, {"step_time_s": 1.0, "backward_forward_ratio": 2.0},
                                  {"step_time_s": 1.5}, "backward_forward_ratio", 3.1, 2.0, "training_config_regression", 1.5),
    # steps slowed; the optimizer step now takes 40% of each step (it runs on the CPU)
    "optimizer_step_large": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.8},
                             "optimizer_step_frac", 0.4, 0.03, "training_config_regression", 1.5),
    # requests queue; the router's least-load counts stayed at zero (it never saw the load)
    "router_load_view_wrong": (SERVING, None, {"ttft_p99_s": 1.0}, {"ttft_p99_s": 5.0, "requests_waiting": 30},
                               "router_load_view_ok", False, True, "load_imbalance", 1.5),
    # the same load spread round-robin over the same replicas ran at speed again
    "routing_change_restored_speed": (SERVING, None, {"ttft_p99_s": 1.0}, {"ttft_p99_s": 5.0, "requests_waiting": 30},
                                      "routing_change_restores", True, False, "load_imbalance", 1.2),
    # steps slowed on a 4-node job; the same software on another node runs at speed
    "slowdown_local_to_host": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                               {"step_time_s": 1.4}, "reproduces_elsewhere", False, True, "gpu_throttling", 1.5),
    # binding the ranks to their GPU's NUMA node with numactl brought the speed back
    "numa_binding_restored_speed": ({"workload": "training", "nodes": 1, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                                    {"step_time_s": 1.3, "host_cpu_util": {"node0": 0.4}},
                                    "numa_binding_restores", True, False, "numa_affinity_misconfig", 2),
    # steps wait on data; doubling num_workers made the job faster
    "more_loader_workers_help": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.7, "dataloader_wait_frac": 0.4},
                                 "loader_workers_effect", "more_helps", "no_effect", "input_pipeline_stall", 1.2),
    # steps wait on data; more workers changed nothing: the storage under them is the limit
    "loader_workers_no_effect": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.7, "dataloader_wait_frac": 0.4, "data_storage": ["network_fs"]},
                                 "loader_workers_effect", "no_effect", "more_helps", "storage_io_bottleneck", 1.5),
    # throughput fell after an engine upgrade; the start-up log now names another attention backend
    "op_backend_switched": (SERVING, ["engine_upgrade"], {"output_tokens_per_s": 1000}, {"output_tokens_per_s": 700},
                            "op_backend_changed", True, False, "software_version_regression", 1.05),
    # steps slowed; a before/after profile shows every kernel ~30% longer
    "slowdown_across_all_ops": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.3},
                                "op_slowdown_spread", "all_ops", "few_ops", "gpu_throttling", 1.5),
    # latency doubled once the GPU was time-sliced with other pods by the device plugin
    "gpu_time_sliced": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"itl_p50_s": 0.02}, {"itl_p50_s": 0.04},
                        "gpu_sharing_mode", "time_sliced", "exclusive", "noisy_neighbor", 1.5),
    # four PCIe GPUs, all-reduce bandwidth fell; the launch script exports NCCL_P2P_DISABLE=1
    "nccl_p2p_forced_off": ({"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "L40S"}, None,
                            {"step_time_s": 1.0, "nccl_busbw_gb_per_s": 20}, {"step_time_s": 1.5, "nccl_busbw_gb_per_s": 6},
                            "nccl_env_overrides", ["p2p_off"], ["nic_pinned"], "pcie_link_degradation", 1.2),
    # two nodes, communication dominates the step; the job template still exports NCCL_IB_DISABLE=1
    "nccl_ib_forced_off": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                           {"step_time_s": 1.8, "comm_time_frac": 0.6}, "nccl_env_overrides", ["ib_off"], ["nic_pinned"],
                           "gpudirect_rdma_disabled", 1.5),
    # GDR is off on the inter-node channels and nvidia_peermem is not loaded on the nodes
    "peermem_missing": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                        {"step_time_s": 1.8, "comm_time_frac": 0.6, "gdr_enabled": False}, "gpu_peermem_loaded", False, True,
                        "gpudirect_rdma_disabled", 1.1),
    # steps slowed; a standalone GEMM benchmark on one GPU reaches half its spec
    "gpu_bench_low": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None, {"step_time_s": 1.0}, {"step_time_s": 1.4},
                      "gpu_bench_frac", {"gpu0": 0.5, "gpu1": 0.98}, {"gpu0": 0.97, "gpu1": 0.98}, "gpu_throttling", 2),
    # replies take 20 s instead of 3; 90% of the generated tokens are thinking
    "reasoning_dominates_output": (SERVING, None, {"e2e_p50_s": 3.0}, {"e2e_p50_s": 20.0},
                                   "reasoning_token_frac", 0.9, 0.0, "output_length_growth", 2),
    # latency tripled with the GPU a third busy; the proxy's single worker runs a full core
    "gateway_thread_saturated": (SERVING, None, {"e2e_p50_s": 1.0}, {"e2e_p50_s": 3.0, "gpu_util": {"gpu0": 0.3}},
                                 "gateway_thread_cpu_util", 1.0, 0.2, "gateway_saturation", 2),
    # steps wait on data; each loader worker runs a full core (decode and augmentation)
    "loader_procs_saturated": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.8, "dataloader_wait_frac": 0.5},
                               "loader_proc_cpu_util", 1.0, 0.1, "input_pipeline_stall", 2),
    # steps wait on data; the dataset is three times the RAM the page cache can use
    "dataset_exceeds_page_cache": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.8, "dataloader_wait_frac": 0.5},
                                   "dataset_over_page_cache", 3.0, 0.3, "storage_io_bottleneck", 2),
    # steps tripled; a batch one notch smaller ran at the old speed
    "footprint_cut_restored_speed": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 3.0},
                                     "footprint_cut_restores", True, False, "memory_pressure", 2),
    # the TTFT tail grew with the KV cache at 90%; three times the served prompt tokens were prefilled
    "prompts_prefilled_again": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                {"ttft_p99_s": 1.0}, {"ttft_p99_s": 6.0, "kv_cache_usage": 0.9},
                                "prefill_recompute_ratio", 3.0, 0.9, "kv_cache_exhaustion", 2),
    # steps took 3.5x as long once gradient accumulation went from 1 to 4 micro-batches
    "grad_accum_up": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None, {"step_time_s": 1.0, "grad_accum_steps": 1},
                      {"step_time_s": 3.5}, "grad_accum_steps", 4, 1, "training_config_regression", 2),
    # ITL rose sevenfold; decoding runs 8x slower while prefills share the engine
    "decode_slowed_by_prefills": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                  {"itl_p50_s": 0.03}, {"itl_p50_s": 0.2}, "decode_interference_ratio", 8, 1.0,
                                  "prefill_compute_bound", 1.5),
    # ITL rose 2.5x; every request now asks for JSON-schema output
    "structured_output_heavy": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                {"itl_p50_s": 0.02}, {"itl_p50_s": 0.05}, "structured_output_frac", 1.0, 0.0,
                                "host_cpu_bottleneck", 1.5),
    # ITL rose with the GPU under half busy; the step copies scalars to the host hundreds of times
    "host_syncs_in_step": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                           {"itl_p50_s": 0.02}, {"itl_p50_s": 0.05, "gpu_util": {"gpu0": 0.4}}, "host_syncs_per_step", 500, 1,
                           "host_cpu_bottleneck", 2),
    # disaggregated TTFT grew tenfold while the transfer itself takes 50 ms; requests wait 4 s around it
    "kv_handoff_wait_long": ({"workload": "inference", "engine": "sglang", "pd_disaggregation": True}, None, {"ttft_p50_s": 0.5},
                             {"ttft_p50_s": 5.0, "kv_transfer_time_p50_s": 0.05}, "kv_handoff_wait_s", 4.0, 0.01,
                             "kv_transfer_bottleneck", 1.5),
    # four PCIe GPUs, steps slowed; GPU-to-GPU copies run at 3 GB/s
    "p2p_copy_bw_low": ({"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "L40S"}, None, {"step_time_s": 1.0},
                        {"step_time_s": 1.6}, "p2p_copy_bw_gb_per_s", {"node0": 3.0}, {"node0": 22.0}, "pcie_link_degradation", 2),
    # the same, with lspci showing ACS redirect on the bridges
    "acs_redirect_on": ({"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "L40S"}, None, {"step_time_s": 1.0},
                        {"step_time_s": 1.6}, "pcie_acs_redirect", True, False, "pcie_link_degradation", 2),
    # a 4-node job's steps take 9x as long and its collectives time out
    "collective_hangs": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None, {"step_time_s": 1.0}, {"step_time_s": 9.0},
                         "collective_timeouts", 3, 0, "gpu_hardware_fault", 1.5),
    # steps quadrupled with the GPU full; the Windows driver's sysmem fallback is on, so nothing fails
    "sysmem_fallback_allowed": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 4.0, "fb_used_frac": {"gpu0": 0.98}},
                                "sysmem_fallback", ["driver_fallback"], ["no_fallback"], "memory_pressure", 1.2),
    # the GPU is nearly full and 45% of the allocator's reserved pool is unused
    "allocator_pool_fragmented": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.6, "fb_used_frac": {"gpu0": 0.97}},
                                  "allocator_unused_reserved_frac", {"rank0": 0.45}, {"rank0": 0.05}, "memory_pressure", 2),
    # ITL rose after a scheduler change; a speculative step now costs three plain decode steps
    "spec_step_costly": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, ["scheduler_config"], {"itl_p50_s": 0.02},
                         {"itl_p50_s": 0.03}, "spec_step_cost_ratio", 3.0, 1.2, "speculative_decoding_regression", 2),
    # TTFT tenfold for the user; the same request from a cloud shell in the same region is fast
    "near_client_fast": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"ttft_p50_s": 0.3}, {"ttft_p50_s": 3.0},
                         "near_client_restores", True, False, "client_network_latency", 2),
    # a batch job's latency sixfold with the GPU at 20%; the worker hands the engine one prompt per call
    "engine_fed_one_at_a_time": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"e2e_p50_s": 5},
                                 {"e2e_p50_s": 30, "gpu_util": {"gpu0": 0.2}}, "engine_call_batch", 1, 64,
                                 "batching_underutilization", 2),
    # disaggregated TTFT sixfold; the KV transfer moves 0.5 GB/s
    "kv_transfer_throughput_low": ({"workload": "inference", "engine": "sglang", "pd_disaggregation": True}, None,
                                   {"ttft_p50_s": 0.5}, {"ttft_p50_s": 3.0}, "kv_transfer_gb_per_s", 0.5, 40,
                                   "kv_transfer_bottleneck", 2),
    # steps wait on data; the loader reads 16 KiB at a time
    "small_random_reads": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.9, "dataloader_wait_frac": 0.5},
                           "mean_read_kb", {"node0": 16}, {"node0": 1024}, "storage_io_bottleneck", 2),
    # steps slowed; 40% of a rank's memory sits on the other socket
    "memory_on_remote_numa": ({"workload": "training", "nodes": 1, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                              {"step_time_s": 1.3}, "numa_remote_mem_frac", {"rank0": 0.4}, {"rank0": 0.0},
                              "numa_affinity_misconfig", 2),
    # steps wait on data; other users' jobs take 70% of the host's CPU
    "host_cpu_taken_by_others": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.8, "dataloader_wait_frac": 0.4},
                                 "host_cpu_other_frac", {"node0": 0.7}, {"node0": 0.02}, "noisy_neighbor", 1.2),
    # steps wait on data; py-spy shows the loader tokenizing and packing text on the fly
    "hotspot_in_data_transform": (TRAINING_1, None, {"step_time_s": 0.4}, {"step_time_s": 0.8, "dataloader_wait_frac": 0.5},
                                  "host_hotspot", ["data_transform"], ["kernel_launch"], "input_pipeline_stall", 2),
    # the TTFT tail grew with a queue; arrivals peak at five times the mean rate
    "bursty_arrivals": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None, {"ttft_p99_s": 1.0},
                        {"ttft_p99_s": 5.0, "requests_waiting": 20}, "request_burstiness", 5, 1.0, "load_surge", 1.5),
    # TTFT tripled; the median prompt went from 800 to 2000 tokens
    "prompt_p50_up": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                      {"ttft_p50_s": 0.5, "prompt_tokens_p50": 800}, {"ttft_p50_s": 1.5}, "prompt_tokens_p50", 2000, 800,
                      "prompt_length_growth", 2),
    # the TTFT tail grew eightfold; prompts have a 30k-token P99 over a 500-token median
    "prompt_lengths_skewed": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                              {"ttft_p99_s": 1.0}, {"ttft_p99_s": 8.0, "prompt_tokens_p99": 30000}, "prompt_tokens_p50", 500,
                              8000, "head_of_line_blocking", 1.5),
    # the TTFT tail grew eightfold; one long prefill holds the whole budget in 60% of the steps
    "long_prefill_holds_budget": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                  {"ttft_p99_s": 1.0}, {"ttft_p99_s": 8.0}, "long_prefill_hold_frac", 0.6, 0.02,
                                  "head_of_line_blocking", 2),
    # the ITL tail grew; a smaller prefill budget fixed ITL only by making TTFT worse
    "prefill_budget_tradeoff": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                {"itl_p99_s": 0.05}, {"itl_p99_s": 0.5}, "prefill_budget_effect", "tradeoff", "no_effect",
                                "prefill_compute_bound", 2),
    # the TTFT tail grew; another prefill budget fixed it at no cost
    "prefill_budget_free_gain": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                 {"ttft_p99_s": 1.0}, {"ttft_p99_s": 8.0}, "prefill_budget_effect", "free_gain", "no_effect",
                                 "head_of_line_blocking", 2),
    # throughput halved; llama.cpp on the same GPU and load runs at the expected speed
    "other_engine_fast": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"output_tokens_per_s": 60},
                          {"output_tokens_per_s": 30}, "other_engine_same_load", True, False, "software_version_regression", 1.5),
    # steps tripled; stack samples show the main thread blocked in file reads
    "stalls_in_file_io": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 3.0}, "stall_site", "file_io", "host_code",
                          "storage_io_bottleneck", 2),
    # TTFT quadrupled as the prefix hit rate fell; the sessions' prefixes are evicted before their next turn
    "prefix_evicted_early": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                             {"ttft_p50_s": 0.5, "prefix_cache_hit_rate": 0.8}, {"ttft_p50_s": 2.0, "prefix_cache_hit_rate": 0.5},
                             "prefix_evicted_before_reuse", True, False, "prefix_cache_degradation", 1.4),
    # the TTFT tail grew eightfold; shortest-first ordering of the same queue brought it back
    "schedule_change_restored_latency": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                         {"ttft_p99_s": 1.0}, {"ttft_p99_s": 8.0}, "schedule_change_restores", True, False,
                                         "head_of_line_blocking", 2),
    # throughput halved; raising only max_num_seqs brought it back
    "batch_cap_raise_restored_speed": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                       {"output_tokens_per_s": 2000}, {"output_tokens_per_s": 900}, "batch_cap_raise_restores",
                                       True, False, "batching_underutilization", 2),
    # TTFT P99 eightfold with a 2000-token mean: a few 12k-token prompts hold the engine, a 3k P99 does not
    "some_prompts_long": (SERVING, None, {"ttft_p99_s": 0.5, "ttft_p50_s": 0.2},
                          {"ttft_p99_s": 4.0, "ttft_p50_s": 0.22, "prompt_tokens_mean": 2000, "requests_running": 20},
                          "prompt_tokens_p99", 12000, 3000, "head_of_line_blocking", 3),
    # throughput down by two thirds; the trainer hands vLLM six prompts per call instead of the whole batch
    "engine_fed_small_calls": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"output_tokens_per_s": 2000},
                               {"output_tokens_per_s": 700, "gpu_util": {"gpu0": 0.4}}, "engine_call_batch", 6, 256,
                               "batching_underutilization", 2),
    # two GeForce cards under one PCIe switch with P2P off: both directions climb the switch's uplink to the CPU
    # (a 3090 pair: the bridge is optional, so the catalog leaves NVLink unknown and the paths decide)
    "switch_pair_without_p2p": ({"workload": "training", "nodes": 1, "gpus_per_node": 2, "gpu": "RTX-3090"}, None,
                                {"step_time_s": 1.0}, {"step_time_s": 1.5, "gpu_p2p_ok": False, "comm_time_frac": 0.4},
                                "gpu_pair_paths", ["PIX"], ["NVLINK"], "pcie_link_degradation", 1.5),
    # a new gateway in front; served throughput flat as the offered load doubles while the GPUs sit at 30%
    "throughput_plateau_behind_gateway": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm",
                                           "gateway": "envoy"}, ["request_path"], {},
                                          {"e2e_p50_s": 2.0, "gpu_util": {"gpu0": 0.3}}, "load_scaling_gain", 1.0, 1.9,
                                          "gateway_saturation", 1.5),
    # steps 50% slower after the run left fp16 for fp32 matmuls; the same slowdown with fp16 kept does not say so
    "precision_left_fp16": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None,
                            {"step_time_s": 1.0, "compute_dtype": "fp16"}, {"step_time_s": 1.5},
                            "compute_dtype", "fp32", "fp16", "training_config_regression", 3),
    # eight requests wait while only 12 of 32 sequence slots run: KV blocks stop admission, not the cap
    "running_below_cap_while_waiting": ({"workload": "inference", "gpus": 1, "engine": "vllm", "max_num_seqs": 32}, None,
                                        {"ttft_p50_s": 0.3}, {"ttft_p50_s": 3.0, "requests_waiting": 8},
                                        "requests_running", 12, 32, "kv_cache_exhaustion", 3),
    # every HDR port trained to 100G: nothing stands out among peers, but all run at half the fabric's rate
    "ib_port_rate_below_fabric": ({"workload": "training", "nodes": 4, "gpus_per_node": 8, "interconnect": "ib_hdr"}, None,
                                  {"step_time_s": 1.0}, {"step_time_s": 1.6, "comm_time_frac": 0.5}, "ib_port_rate_gbit_per_s",
                                  {"node0/mlx5_0": 100, "node1/mlx5_0": 100}, {"node0/mlx5_0": 200, "node1/mlx5_0": 200},
                                  "rdma_network_degradation", 2),
    # TTFT quadrupled; 95% of each prompt repeats the conversation so far, yet the cache serves 30% (against 35%)
    "prefix_hits_below_reuse": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                                {"ttft_p50_s": 0.5}, {"ttft_p50_s": 2.0, "prefix_cache_hit_rate": 0.3},
                                "prompt_reuse_frac", 0.95, 0.35, "prefix_cache_degradation", 2),
    # ITL up 50% after the deployment went from one GPU to TP=2
    "tp_raised": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}, None,
                  {"itl_p50_s": 0.02, "tp_size": 1}, {"itl_p50_s": 0.03}, "tp_size", 2, 1, "tensor_parallel_comm", 3),
    # throughput down 30% after the draft length went from 2 to 4 tokens per verify step, acceptance 0.65 -> 0.55
    "draft_tokens_raised": ({"workload": "inference", "gpus": 1, "engine": "vllm", "client_concurrency": 8}, None,
                            {"output_tokens_per_s": 300, "spec_decode_acceptance_rate": 0.65, "spec_draft_tokens": 2},
                            {"output_tokens_per_s": 210, "spec_decode_acceptance_rate": 0.55}, "spec_draft_tokens", 4, 2,
                            "speculative_decoding_regression", 2),
    # steps 50% slower after the run went from no pipeline to four stages
    "pp_raised": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None, {"step_time_s": 1.0, "pp_size": 1},
                  {"step_time_s": 1.5}, "pp_size", 4, 1, "training_config_regression", 2),
    # the same step runs 1.8x faster on synthetic batches than with the real loader
    "synthetic_input_much_faster": ({"workload": "training", "nodes": 1, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                                    {"step_time_s": 1.5, "gpu_util": {"gpu0": 0.5}}, "synthetic_input_speedup", 1.8, 1.0,
                                    "input_pipeline_stall", 3),
    # the router sends the hottest expert three times the mean load; expert-parallel steps wait for its rank
    "expert_load_skewed": ({"workload": "training", "nodes": 4, "gpus_per_node": 8}, None, {"step_time_s": 1.0},
                           {"step_time_s": 1.5, "comm_time_frac": 0.4}, "expert_load_imbalance", 3.0, 1.1, "load_imbalance", 2),
    # a served MoE's busiest expert-parallel rank carries 1.5x the mean (under the 2x bar): that rank paces every MoE layer
    "expert_load_uneven": ({"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "sglang"}, None,
                           {"output_tokens_per_s": 1000}, {"output_tokens_per_s": 800}, "expert_load_imbalance", 1.5, 1.1,
                           "load_imbalance", 1.5),
    # decode 40% slower; setting the power limit back to rated brought it back
    "clock_power_raise_restored_speed": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None,
                                         {"output_tokens_per_s": 100}, {"output_tokens_per_s": 60},
                                         "clock_power_raise_restores", True, False, "gpu_throttling", 3),
    # the busy host thread spends its time in structured-output grammar masks and sampling, not relaying in a proxy
    "hotspot_in_engine_cpu_path:sampling": ({"workload": "inference", "gpus": 1, "engine": "vllm"}, None, {"itl_p50_s": 0.02},
                                            {"itl_p50_s": 0.05, "gpu_util": {"gpu0": 0.5}},
                                            "host_hotspot", ["sampling"], ["stream_proxy"], "host_cpu_bottleneck", 2),
    # under pipeline parallelism the step slowed once each step carried 2 micro-batches instead of 8 (bubble (p-1)/m)
    "grad_accum_down": ({"workload": "training", "nodes": 2, "gpus_per_node": 8}, None, {"step_time_s": 1.0, "grad_accum_steps": 8},
                        {"step_time_s": 1.4}, "grad_accum_steps", 2, 8, "training_config_regression", 2),
    # a micro-batch twice the baseline's, and the GPU's memory now full
    "micro_batch_up": (TRAINING_1, None, {"step_time_s": 1.0, "micro_batch_size": 4, "fb_used_frac": {"gpu0": 0.8}},
                       {"step_time_s": 2.5, "fb_used_frac": {"gpu0": 0.99}}, "micro_batch_size", 8, 4, "memory_pressure", 1.5),
    # host memory available fell from 60% to 15% while the steps slowed and the CPUs waited on IO
    "host_memory_down": (TRAINING_1, None, {"step_time_s": 1.0, "memory_available_frac": {"node0": 0.6}},
                         {"step_time_s": 1.8, "cpu_iowait_frac": {"node0": 0.25}}, "memory_available_frac",
                         {"node0": 0.15}, {"node0": 0.55}, "memory_pressure", 2),
    # PSI memory 'some' at 30%: the job's threads stall on reclaim and swap-ins
    "memory_stalls_high": (TRAINING_1, None, {"step_time_s": 1.0}, {"step_time_s": 1.8, "cpu_iowait_frac": {"node0": 0.25}},
                           "memory_stall_frac", {"node0": 0.3}, {"node0": 0.0}, "memory_pressure", 3),
    # decode steps 75% slower while the tensor pipes are busy: prefill chunks share the steps (decode alone is HBM-bound)
    "itl_up_tensor_busy": (SERVING, None, {"itl_p50_s": 0.02}, {"itl_p50_s": 0.035}, "tensor_active",
                           {"gpu0": 0.7}, {"gpu0": 0.2}, "prefill_compute_bound", 1.5),
    # TTFT tripled under P/D disaggregation while the KV transfer fell from 20 to 8 GB/s
    "kv_transfer_throughput_down": (DISAGG, None, {"ttft_p50_s": 0.5, "kv_transfer_gb_per_s": 20}, {"ttft_p50_s": 1.5},
                                    "kv_transfer_gb_per_s", 8, 19, "kv_transfer_bottleneck", 2),
    # the KV moves at 10 GB/s on 400 Gb/s ports (a fifth of one port)
    "kv_transfer_below_link": ({**DISAGG, "interconnect": "ib_ndr"}, None, {"ttft_p50_s": 0.5}, {"ttft_p50_s": 1.5},
                               "kv_transfer_gb_per_s", 10, 30, "kv_transfer_bottleneck", 1.5),
    # TTFT 2 s of which queue and prefill take 0.3 s: the rest is the hand-off
    "ttft_outside_engine_disaggregated": (DISAGG, None, {"ttft_p50_s": 0.4, "queue_time_p50_s": 0.1, "prefill_time_p50_s": 0.2},
                                          {"queue_time_p50_s": 0.1, "prefill_time_p50_s": 0.2}, "ttft_p50_s", 2.0, 0.35,
                                          "kv_transfer_bottleneck", 2),
    # P and D on one host: NVLink traffic fell tenfold since the KV stopped crossing it
    "nvlink_bw_down_disaggregated": ({**DISAGG, "nodes": 1}, None, {"ttft_p50_s": 0.5, "nvlink_bw_gb_per_s": {"gpu0": 100}},
                                     {"ttft_p50_s": 1.5}, "nvlink_bw_gb_per_s", {"gpu0": 10}, {"gpu0": 95}, "kv_transfer_bottleneck", 1.5),
    # the wait around the transfer (bootstrap, pre-allocation) went from 50 to 200 ms
    "kv_handoff_wait_up": (DISAGG, None, {"ttft_p50_s": 0.5, "kv_handoff_wait_s": 0.05}, {"ttft_p50_s": 1.0},
                           "kv_handoff_wait_s", 0.2, 0.05, "kv_transfer_bottleneck", 2),
    # TTFT 0.5 s -> 0.7 s with the KV transfer itself at 6 ms: 180 ms of the 0.7 s is the wait around the hand-off
    "kv_handoff_wait_share_of_ttft": (DISAGG, None, {"ttft_p50_s": 0.5}, {"ttft_p50_s": 0.7, "kv_transfer_time_p50_s": 0.006},
                                      "kv_handoff_wait_s", 0.18, 0.01, "kv_transfer_bottleneck", 2),
    # the step slowed by 40% after the enforced power limit went from 700 W to 450 W on the only GPU
    "power_limit_down": (TRAINING_1, None, {"step_time_s": 1.0, "power_limit_w": {"gpu0": 700}}, {"step_time_s": 1.4},
                         "power_limit_w", {"gpu0": 450}, {"gpu0": 700}, "gpu_throttling", 2),
    # one GPU of four benchmarks 14% below its identical peers (above the 80%-of-spec bar): a slow device
    "gpu_bench_gpu_low": ({"workload": "training", "nodes": 1, "gpus_per_node": 4}, None, {"step_time_s": 1.0},
                          {"step_time_s": 1.3}, "gpu_bench_frac", {"gpu0": 0.85, "gpu1": 0.99, "gpu2": 0.99, "gpu3": 0.98},
                          {f"gpu{i}": 0.99 for i in range(4)}, "gpu_throttling", 2),
    # TTFT tripled while the engine now prefills 80% of each prompt itself instead of 20% (fewer prefix hits)
    "prefill_recompute_up": (SERVING, None, {"ttft_p50_s": 0.3, "prefill_recompute_ratio": 0.2}, {"ttft_p50_s": 0.9},
                             "prefill_recompute_ratio", 0.8, 0.2, "prefix_cache_degradation", 2),
    # replies four times slower at the same ITL, with most requests running to max_tokens
    "outputs_hit_token_limit": (SERVING, None, {"e2e_p50_s": 5.0, "itl_p50_s": 0.03}, {"e2e_p50_s": 20.0, "itl_p50_s": 0.03},
                                "finish_reason_length_frac", 0.8, 0.02, "output_length_growth", 2),
}


def test_one_request_in_flight_rules_a_load_surge_out(engine):
    """A closed loop of one request at a time cannot offer more than the service completes, so no queue forms:
    the same slower replies with the clients keeping one request in flight count against a load surge."""
    def p_surge(concurrency):
        d = _diagnose(engine, {**SERVING, "client_concurrency": concurrency}, {"e2e_p50_s": 1.0},
                      {"e2e_p50_s": 3.0, "slowdown_pattern": "cold_only"})
        return d.observations["clients_overlap"].present, _p(d, "load_surge")
    (one, p_one), (many, p_many) = p_surge(1), p_surge(64)
    assert one is False and many is True
    assert p_one < p_many / 3


def test_fewer_micro_batches_count_only_under_pipeline_parallelism(engine):
    """Fewer micro-batches per step grow the pipeline bubble ((p-1)/m); with the pipeline size known to be 1 there is
    no bubble, so the reading is unknown rather than evidence."""
    def seen(pp):
        base, now = {"step_time_s": 1.0, "grad_accum_steps": 8}, {"step_time_s": 1.4, "grad_accum_steps": 2}
        if pp:
            base, now = {**base, "pp_size": pp}, {**now, "pp_size": pp}
        return _diagnose(engine, {"workload": "training", "nodes": 2, "gpus_per_node": 8}, base, now).observations["grad_accum_down"].present
    assert seen(4) is True and seen(None) is True and seen(1) is None


@pytest.mark.parametrize("change, cause, context, base, now", [
    # a long prompt arriving among short ones is a change in the request mix
    ("traffic_shift", "head_of_line_blocking", SERVING, {"ttft_p99_s": 1.0}, {"ttft_p99_s": 9.0}),
    # more clients than the batch cap admits
    ("traffic_shift", "batching_underutilization", SERVING, {"ttft_p50_s": 0.5}, {"ttft_p50_s": 3.0, "requests_waiting": 40}),
    # a degraded PCIe path carries traffic only once the job spans several GPUs
    ("parallelism_config", "pcie_link_degradation", {"workload": "training", "nodes": 1, "gpus_per_node": 4},
     {"step_time_s": 0.5}, {"step_time_s": 2.3, "comm_time_frac": 0.6}),
    # more nodes reading the same shared filesystem
    ("nodes_added", "storage_io_bottleneck", {"workload": "training", "nodes": 8, "gpus_per_node": 8},
     {"step_time_s": 1.0}, {"step_time_s": 1.6, "dataloader_wait_frac": 0.4}),
    # the same GPU behind a slower host CPU
    ("nodes_added", "host_cpu_bottleneck", {"workload": "inference", "gpus": 1, "engine": "vllm"},
     {"itl_p50_s": 0.02}, {"itl_p50_s": 0.035, "main_thread_cpu_util": 1.0}),
])
def test_a_change_that_exposes_a_cause_counts_for_it(engine, change, cause, context, base, now):
    """A complete change list says what else did not change: the change that exposes a latent limit (more traffic,
    more GPUs, another node) raises that cause over the same evidence with nothing changed."""
    run = lambda changes: engine.diagnose(parse_snapshot({"context": context, "changes": changes, "baseline": base,
                                                          "current": now}, engine.kb, "test"), with_probes=False)
    odds = lambda p: p / (1 - p)
    # 1.3, not more: a cause that names the change itself (a training setting names a new parallel layout) takes a
    # share of it, so the exposed cause gains less than the change's own likelihood ratio
    assert odds(_p(run([change]), cause)) > 1.3 * odds(_p(run([]), cause))


@pytest.mark.parametrize("finding", READINGS)
def test_a_stated_reading_names_its_cause(engine, finding):
    context, changes, base, now, signal, value, other, cause, factor = READINGS[finding]
    with_it, without = _reading_effect(engine, context, base, now, signal, value, other, finding.split(":")[0], changes)
    assert with_it.hypotheses[0].id == cause
    assert _p(with_it, cause) > factor * _p(without, cause)


def test_a_vm_raises_the_causes_a_hypervisor_brings(engine):
    """Inside a VM, P2P, GPUDirect, the NUMA view and the host's cores depend on the hypervisor: each of those
    causes gains against the same evidence on a physical host, and a software cause does not."""
    context = {"workload": "training", "nodes": 1, "gpus_per_node": 4, "gpu": "L40S"}
    base, now = {"step_time_s": 1.0, "nccl_busbw_gb_per_s": 20}, {"step_time_s": 1.6, "nccl_busbw_gb_per_s": 6}
    vm, host = _reading_effect(engine, context, base, now, "virtualized", True, False, "runs_in_vm")
    odds = lambda d, cause: _p(d, cause) / (1 - _p(d, cause))
    for cause in ("pcie_link_degradation", "numa_affinity_misconfig", "noisy_neighbor"):
        assert odds(vm, cause) > 1.3 * odds(host, cause), cause
    assert _p(vm, "software_version_regression") < _p(host, "software_version_regression")


def test_a_thread_blocked_in_a_driver_call_points_outside_the_engine(engine):
    """Stack samples that find the serving thread blocked in a CUDA driver call (a memory query, a synchronize)
    raise a neighbour holding a driver-wide lock and a hung GPU, and lower the engine's own CPU path, against
    the same stall with the thread busy in host code."""
    context = {"workload": "inference", "nodes": 1, "gpus_per_node": 8, "engine": "vllm"}
    blocked, busy = _reading_effect(engine, context, {"e2e_p99_s": 20}, {"e2e_p99_s": 300, "output_tokens_per_s": 0},
                                    "stall_site", "device_call", "host_code", "stalls_in_device_call")
    assert _p(blocked, "noisy_neighbor") > 1.5 * _p(busy, "noisy_neighbor")
    assert _p(blocked, "gpu_hardware_fault") > 3 * _p(busy, "gpu_hardware_fault")
    assert _p(blocked, "host_cpu_bottleneck") < _p(busy, "host_cpu_bottleneck") / 3


def test_a_smaller_kv_pool_points_at_kv_exhaustion(engine):
    """Same load and prompts, TTFT up with requests waiting: a KV pool that shrank since the baseline raises KV
    exhaustion over the same evidence with the same pool (most exhaustion is demand, so it need not lead)."""
    shrank, same = _reading_effect(engine, SERVING, {"ttft_p50_s": 0.5, "requests_waiting": 1, "kv_cache_capacity_tokens": 268000},
                                   {"ttft_p50_s": 4.0, "requests_waiting": 12},
                                   "kv_cache_capacity_tokens", 197000, 268000, "kv_capacity_down")
    assert _p(shrank, "kv_cache_exhaustion") > 2 * _p(same, "kv_cache_exhaustion")


def test_time_spent_in_front_of_the_engine_names_the_front(engine):
    """Clients see TTFT triple and the access log puts 0.3 s per request in front of the engine: a front-end
    cause (gateway or network) leads; with the time in front unchanged at 20 ms it does not."""
    front, none = _reading_effect(engine, SERVING, {"ttft_p50_s": 0.15, "frontend_overhead_s": 0.02}, {"ttft_p50_s": 0.45},
                                  "frontend_overhead_s", 0.33, 0.02, "frontend_overhead_high")
    assert front.observations["frontend_overhead_up"].present
    assert front.hypotheses[0].id in ("gateway_saturation", "client_network_latency")
    front_p = lambda d: _p(d, "gateway_saturation") + _p(d, "client_network_latency")
    assert front_p(front) > 2 * front_p(none)


def test_a_rollback_that_restores_the_speed_names_the_change(engine):
    """After an NCCL upgrade the bus bandwidth halved; pinning the old NCCL alone brought it back, which
    names the release over a network fault that happened at the same time."""
    restored, stayed = _reading_effect(engine, {"workload": "training", "nodes": 4, "gpus_per_node": 8, "rdma": True},
                                       {"nccl_busbw_gb_per_s": 180.0, "step_time_s": 1.0},
                                       {"nccl_busbw_gb_per_s": 90.0, "step_time_s": 1.4},
                                       "rollback_restores", True, False, "rollback_restored_speed", changes=["nccl_upgrade"])
    assert restored.hypotheses[0].id == "software_version_regression"
    odds = lambda d: _p(d, "software_version_regression") / (1 - _p(d, "software_version_regression"))
    assert odds(restored) > 3 * odds(stayed)
    assert _p(restored, "rdma_network_degradation") < _p(stayed, "rdma_network_degradation")


def test_a_level_reached_counts_and_a_zero_count_does_not(engine):
    """`at_least` rules hold at their bound (host CPU at exactly 90% is saturated, as the title says), while a
    count rule `above: 0` holds only for a count above zero (no XID errors is not an XID finding)."""
    def observed(current):
        snap = parse_snapshot({"context": {"workload": "training", "nodes": 1, "gpus_per_node": 1},
                               "current": current}, engine.kb, "test")
        return engine.diagnose(snap, with_probes=False).observations
    at_bound = observed({"host_cpu_util": {"node0": 0.9}, "xid_errors": {"gpu0": 0}})
    assert at_bound["host_cpu_high"].present is True
    assert at_bound["xid_present"].present is False
    below = observed({"host_cpu_util": {"node0": 0.7}, "xid_errors": {"gpu0": 1}})
    assert below["host_cpu_high"].present is False
    assert below["xid_present"].present is True


def test_waiting_inside_collectives_points_at_a_straggler_not_the_wire(engine):
    """The communication share grew. If ranks spend it waiting for a late peer, a straggler (uneven work, a
    late batch, a throttled GPU) sets the pace; if they enter together and move data, the link is slow."""
    context = {"workload": "training", "nodes": 2, "gpus_per_node": 8}
    base, now = {"step_time_s": 1.0, "comm_time_frac": 0.1}, {"step_time_s": 1.5, "comm_time_frac": 0.35}
    waiting, moving = _reading_effect(engine, context, base, now, "collective_wait_frac", 0.8, 0.05,
                                      "collectives_wait_for_peers")
    assert moving.observations["collectives_move_data"].present
    for straggler in ("load_imbalance", "input_pipeline_stall", "gpu_throttling"):
        assert _p(waiting, straggler) > 1.5 * _p(moving, straggler)
    for wire in ("rdma_network_degradation", "gpudirect_rdma_disabled"):
        assert _p(moving, wire) > 1.1 * _p(waiting, wire)


def test_few_fully_cold_turns_do_not_clear_the_prefix_cache(engine):
    """No follow-up turn missing the prefix cache entirely leaves the finding unknown, not absent: turns that keep
    part of their prefix (a timestamp half-way down the system prompt) still re-prefill the rest."""
    context = {"workload": "inference", "engine": "vllm"}
    base, now = {"ttft_p50_s": 0.5, "prefix_cache_hit_rate": 0.85}, {"ttft_p50_s": 2.0, "prefix_cache_hit_rate": 0.8}
    none = _diagnose(engine, context, base, {**now, "cold_turn_frac": 0.0})
    obs = none.observations["cold_turns_frequent"]
    assert obs.present is None and "absence is not counted" in obs.detail
    assert "cold_turns_frequent" not in engine.evidence(none.observations)
    unread = _diagnose(engine, context, base, now)
    assert _p(none, "prefix_cache_degradation") == pytest.approx(_p(unread, "prefix_cache_degradation"))
    # one turn in four re-prefilling the whole conversation, behind an 80% cumulative hit rate
    some = _diagnose(engine, context, base, {**now, "cold_turn_frac": 0.25})
    assert some.hypotheses[0].id == "prefix_cache_degradation"
    assert _p(some, "prefix_cache_degradation") > 1.3 * _p(unread, "prefix_cache_degradation")


def test_communication_time_spent_waiting_for_a_peer_is_not_a_slow_link(engine):
    """NCCL kernels that wait for a late rank count as communication time: with most of it spent waiting
    (collective_wait_frac >= 0.5) a high communication share says nothing about the links."""
    ctx = {"workload": "training", "nodes": 4, "gpus_per_node": 8}
    now = {"step_time_s": 1.6, "comm_time_frac": 0.6}
    waiting = _diagnose(engine, ctx, {"step_time_s": 1.0}, {**now, "collective_wait_frac": 0.7})
    moving = _diagnose(engine, ctx, {"step_time_s": 1.0}, {**now, "collective_wait_frac": 0.1})
    assert waiting.observations["comm_share_high"].present is None
    assert moving.observations["comm_share_high"].present is True
    p = lambda d, c: next(h.probability for h in d.hypotheses if h.id == c)
    assert p(waiting, "rdma_network_degradation") < p(moving, "rdma_network_degradation")


def test_a_prefill_budget_test_with_one_request_in_flight_is_not_read(engine):
    """With one request running a prefill budget cannot trade TTFT against other requests' decode, so the
    outcome of a budget sweep says nothing about scheduling order; with several running it does."""
    base, now = {"ttft_p50_s": 1.0}, {"ttft_p50_s": 3.0, "prefill_budget_effect": "tradeoff"}
    alone = _diagnose(engine, SERVING, base, {**now, "requests_running": 1})
    shared = _diagnose(engine, SERVING, base, {**now, "requests_running": 24})
    assert alone.observations["prefill_budget_tradeoff"].present is None
    assert shared.observations["prefill_budget_tradeoff"].present is True


@pytest.mark.parametrize("wait_before, wait_now, data_wait", [(0.05, 0.45, True), (0.05, 0.08, False)])
def test_where_the_added_step_time_went(engine, wait_before, wait_now, data_wait):
    """Step 0.11 s -> 0.16 s: with the loader wait going from 5% to 45% of the step, all of the added 50 ms is
    waiting for data (the rest of the step even shrank); with the wait at 8%, the step's own work grew."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    d = _diagnose(engine, ctx, {"step_time_s": 0.11, "dataloader_wait_frac": wait_before, "comm_time_frac": 0.1},
                  {"step_time_s": 0.16, "dataloader_wait_frac": wait_now, "comm_time_frac": 0.1})
    assert d.observations["added_time_is_data_wait"].present is data_wait
    assert d.observations["added_time_in_compute"].present is (not data_wait)
    assert "took" in d.observations["added_time_is_data_wait"].detail
    top = d.hypotheses[0].id
    assert (top in ("input_pipeline_stall", "storage_io_bottleneck")) is data_wait


@pytest.mark.parametrize("wait_now, ruled_out", [(0.1, True), (0.6, False)])
def test_a_data_wait_unknown_before_bounds_its_share_of_the_added_time(engine, wait_now, ruled_out):
    """Step 0.5 s -> 1.0 s with the loader wait measured only now: counting the old wait as 0 gives the most the wait
    can have taken of the added 0.5 s. At 10% of the step that is at most 20%: the loader did not cause the
    slowdown. At 60% it could be up to 120%, which proves nothing either way, so nothing is read."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    d = _diagnose(engine, ctx, {"step_time_s": 0.5}, {"step_time_s": 1.0, "dataloader_wait_frac": wait_now})
    obs = d.observations.get("added_time_is_data_wait")
    if ruled_out:
        assert obs.present is False
        assert "at most 20%" in obs.detail and "unknown in the baseline" in obs.detail
    else:
        assert obs is None or obs.present is None


def test_added_time_is_not_read_from_a_small_change(engine):
    """A 5% longer step: which share took the added few milliseconds is noise, so nothing is read."""
    ctx = {"workload": "training", "nodes": 1, "gpus_per_node": 8}
    d = _diagnose(engine, ctx, {"step_time_s": 1.0, "dataloader_wait_frac": 0.1}, {"step_time_s": 1.05, "dataloader_wait_frac": 0.14})
    obs = d.observations.get("added_time_is_data_wait")
    assert obs is None or obs.present is None


def test_a_controlled_test_that_did_not_help_counts_in_full(engine):
    """Raising the power cap without getting the speed back is an experiment's outcome, not a threshold just missed:
    its absence divides the odds of throttling by the full likelihood ratio (1 - strength), not its tempered root."""
    assert engine.kb.signals["clock_power_raise_restores"].controlled_test
    strength = next(s.strength for s in engine.kb.root_causes["gpu_throttling"].signatures
                    if s.target == "clock_power_raise_restored_speed")
    base = {"step_time_s": 1.0, "sm_clock_mhz": {"gpu0": 1980}, "gpu_util": 0.95}
    now = {"step_time_s": 1.4, "sm_clock_mhz": {"gpu0": 1400}, "gpu_util": 0.95, "power_w": {"gpu0": 398},
           "power_limit_w": {"gpu0": 400}}
    odds = lambda p: p / (1 - p)
    untested = _p(_diagnose(engine, TRAINING_1, base, now), "gpu_throttling")
    no_help = _p(_diagnose(engine, TRAINING_1, base, {**now, "clock_power_raise_restores": False}), "gpu_throttling")
    assert odds(no_help) / odds(untested) == pytest.approx(1 - strength, rel=0.02)


def test_one_starved_rank_is_a_loader_wait(engine):
    """In a synchronous step the job runs at the pace of the one rank blocked on its loader; its peers wait in the
    collective instead, so the median rank hides the stall and the highest rank shows it."""
    d = _diagnose(engine, {"workload": "training", "nodes": 1, "gpus_per_node": 4}, {"step_time_s": 1.0},
                  {"step_time_s": 1.5, "dataloader_wait_frac": {"rank0": 0.02, "rank1": 0.01, "rank2": 0.03, "rank3": 0.35}})
    assert d.observations["dataloader_wait_high"].present
    assert d.hypotheses[0].id == "input_pipeline_stall"


@pytest.mark.parametrize("gpu, per_node, measured, expected", [
    ("L40S", 2, None, True),          # a board that takes no NVLink at all: its GPUs talk over PCIe
    ("RTX-4090", 4, None, True),
    ("H100", 8, None, None),          # built-in NVLink: the catalog says nothing of the links that are up
    ("A100-PCIe-80GB", 2, None, None),  # an optional bridge may be fitted
    ("L40S", 1, None, None),          # one GPU per node: no link between GPUs to lack
    ("L40S", 2, 4, False),            # a reading wins over the catalog
])
def test_a_gpu_without_nvlink_is_read_from_the_catalog(engine, gpu, per_node, measured, expected):
    current = {"itl_p50_s": 0.05} | ({"nvlink_active_links": measured} if measured is not None else {})
    d = _diagnose(engine, {**SERVING, "gpu": gpu, "gpus_per_node": per_node, "tp": per_node}, {"itl_p50_s": 0.03}, current)
    seen = d.observations.get("no_nvlink")
    assert (seen.present if seen else None) is expected


@pytest.mark.parametrize("cpu, threads, present", [(0.5, None, True), (1.0, None, None), (None, None, True),
                                                   (0.13, 4.0, None), (0.13, 1.0, True)])
def test_loader_workers_no_effect_reads_storage_only_with_cpu_to_spare(engine, cpu, threads, present):
    """More loader workers that change nothing point under the loader (storage) only while the job has idle cores:
    with every core busy, more processes cannot add CPU, so a CPU-bound loader shows the same 'no effect'. A
    narrow affinity mask (4 busy threads per usable core) saturates the job's cores while the host average is 13%."""
    now = {"step_time_s": 0.8, "dataloader_wait_frac": 0.5, "loader_workers_effect": "no_effect"}
    if cpu is not None:
        now["host_cpu_util"] = {"node0": cpu}
    if threads is not None:
        now["cpu_threads_per_core"] = {"node0": threads}
    d = _diagnose(engine, TRAINING_1, {"step_time_s": 0.4}, now)
    assert d.observations["loader_workers_no_effect"].present is present
    if cpu == 1.0 or threads == 4.0:
        ids = [h.id for h in d.hypotheses]
        assert ids.index("input_pipeline_stall") < ids.index("storage_io_bottleneck")


@pytest.mark.parametrize("util, idle_finding, busy_finding", [(0.1, True, None), (0.3, None, True), (0.9, None, True)])
def test_clocks_down_on_an_idle_gpu_read_as_idle_power_state_not_load_throttling(engine, util, idle_finding, busy_finding):
    """Clocks below the baseline on a mostly idle GPU are the idle power state between sparse requests (clocks event
    reason GpuIdle); on a busy GPU the same drop is load throttling. Each reading is unknown in the other's regime, and
    a GPU exactly 30% busy (the bound) is read as busy rather than by neither."""
    base = {"e2e_p50_s": 0.01, "sm_clock_mhz": {"gpu0": 1600}, "gpu_util": {"gpu0": 0.9}}
    now = {"e2e_p50_s": 0.04, "sm_clock_mhz": {"gpu0": 600}, "gpu_util": {"gpu0": util}}
    d = _diagnose(engine, {"workload": "inference", "nodes": 1, "gpus_per_node": 1}, base, now)
    assert d.observations["sm_clock_down_while_idle"].present is idle_finding
    assert d.observations["sm_clock_down"].present is busy_finding
    if util < 0.3:   # the idle reading counts for throttling (its idle power-state form); without clocks it cannot
        p = lambda d: next(h.probability for h in d.hypotheses if h.id == "gpu_throttling")  # noqa: E731
        no_clocks = {k: v for k, v in now.items() if k != "sm_clock_mhz"}
        without = _diagnose(engine, {"workload": "inference", "nodes": 1, "gpus_per_node": 1}, base, no_clocks)
        assert p(d) > 2 * p(without)


def test_calls_shrunk_against_the_baseline_point_at_the_layer_above(engine):
    """An RL orchestrator that refills one group of 16 where it used to hand vLLM 512 (verl issue 1663 sends
    rollouts one after another): the calls shrank, so batching underutilization gains. Calls of 400 against 512
    are not half, and a call size with no baseline shows no change."""
    p = lambda d: next(h.probability for h in d.hypotheses if h.id == "batching_underutilization")
    shrunk = _diagnose(engine, SERVING, {"engine_call_batch": 512}, {"engine_call_batch": 16})
    kept = _diagnose(engine, SERVING, {"engine_call_batch": 512}, {"engine_call_batch": 400})
    unknown = _diagnose(engine, SERVING, {}, {"engine_call_batch": 16})
    assert shrunk.observations["engine_calls_shrunk"].present
    assert kept.observations["engine_calls_shrunk"].present is False
    assert "engine_calls_shrunk" not in unknown.observations
    assert p(shrunk) > 2 * p(kept)


def test_an_rl_step_that_waits_for_a_starved_rollout_engine_points_at_batching(engine):
    """RL post-training with rollouts (TRL issue 246: 256 samples took 176 s at batch 1 and 12 s at batch 16): a
    step several times slower gains batching underutilization when the job generates, and says nothing of it
    in plain training, where batching is out of scope (its prior is cut)."""
    p = lambda d: next((h.probability for h in d.hypotheses if h.id == "batching_underutilization"), 0.0)
    rollouts = {"workload": "training", "rollouts": True, "gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 8}
    slow = _diagnose(engine, rollouts, {"step_time_s": 90}, {"step_time_s": 900})
    steady = _diagnose(engine, rollouts, {"step_time_s": 90}, {"step_time_s": 92})
    plain = _diagnose(engine, {**rollouts, "rollouts": False}, {"step_time_s": 90}, {"step_time_s": 900})
    assert p(slow) > 1.5 * p(steady)
    assert p(plain) < p(slow) / 10
