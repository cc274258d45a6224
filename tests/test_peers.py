"""Peer comparison on real-looking fleets: one slow GPU among 32 is named, a healthy fleet flags nothing."""
from perfdoctor.engine.findings import evaluate
from perfdoctor.engine.peers import robust_outliers
from perfdoctor.symptoms.snapshot import parse_snapshot


def test_one_slow_gpu_among_32_is_flagged():
    clocks = {f"node{n}/gpu{g}": 1410.0 + (g % 3) for n in range(4) for g in range(8)}
    clocks["node2/gpu5"] = 1005.0
    assert list(robust_outliers(clocks, "low", 3.5, 0.1, 4)) == ["node2/gpu5"]


def test_small_jitter_is_not_an_outlier():
    clocks = {f"gpu{g}": 1980.0 - 15 * (g % 4) for g in range(16)}
    assert robust_outliers(clocks, "low", 3.5, 0.1, 4) == {}


def test_too_few_peers_flags_nothing():
    assert robust_outliers({"gpu0": 1000.0, "gpu1": 2000.0, "gpu2": 2000.0}, "low", 3.5, 0.1, 4) == {}


def test_outlier_finding_names_the_entity(kb):
    clocks = {f"gpu{g}": 1410 for g in range(8)}
    clocks["gpu3"] = 900
    snap = parse_snapshot({"current": {"sm_clock_mhz": clocks}}, kb)
    obs = evaluate(kb, snap)["sm_clock_gpu_low"]
    assert obs.present and obs.entities == ["gpu3"]
    assert "gpu3=900 MHz" in obs.detail and "1 of 8" in obs.detail


def test_zero_baseline_gives_no_ratio_and_swapped_transports_are_a_change(kb):
    snap = parse_snapshot({"baseline": {"queue_time_p99_s": 0, "nccl_transport": {"n1": "NET/Socket", "n2": "NET/IB"}},
                           "current": {"queue_time_p99_s": 0.0001,
                                       "nccl_transport": {"n1": "NET/IB", "n2": "NET/Socket"}}}, kb)
    obs = evaluate(kb, snap)
    assert "queue_time_p99_up" not in obs
    assert obs["nccl_transport_changed"].present


def test_losing_a_baseline_value_is_its_own_finding(kb):
    """NVLink P2P in the baseline and SHM now is a lost transport; one IPC path changing is not."""
    def lost(baseline, current):
        snap = parse_snapshot({"baseline": {"nccl_transport": baseline}, "current": {"nccl_transport": current}}, kb)
        return evaluate(kb, snap).get("nccl_nvlink_transport_lost")

    assert lost("P2P/NVLink", "SHM").present
    assert lost({"node0": "P2P/NVLink", "node1": "P2P/NVLink"},
                {"node0": "P2P/NVLink", "node1": "SHM"}).entities == ["node1"]
    assert not lost("P2P/IPC", "SHM").present
    assert not lost({"node0": "P2P/NVLink"}, {"node0": "P2P/NVLink"}).present
    no_baseline = evaluate(kb, parse_snapshot({"current": {"nccl_transport": "SHM"}}, kb))
    assert "nccl_nvlink_transport_lost" not in no_baseline


def test_a_reported_change_that_explains_the_difference_makes_the_comparison_moot(kb):
    """One node (NVLink) before, two nodes (NET) now: the transport differs because nodes were added."""
    raw = {"baseline": {"nccl_transport": "P2P/NVLink"}, "current": {"nccl_transport": "NET/Socket"}}
    grown = evaluate(kb, parse_snapshot({**raw, "changes": ["nodes_added"]}, kb))
    for fid in ("nccl_nvlink_transport_lost", "nccl_transport_changed"):
        assert grown[fid].present is None and "nodes_added explains" in grown[fid].detail
    assert grown["nccl_socket_transport"].present      # the current value itself still counts
    same_nodes = evaluate(kb, parse_snapshot({**raw, "changes": ["driver_upgrade"]}, kb))
    assert same_nodes["nccl_nvlink_transport_lost"].present and same_nodes["nccl_transport_changed"].present


def test_latency_split_points_outside_the_engine(engine):
    """TTFT up 6x with queue and prefill only 17% of it: the time is lost before or after the engine."""
    snap = parse_snapshot({"context": {"workload": "inference"}, "baseline": {"ttft_p50_s": 0.05},
                           "current": {"ttft_p50_s": 0.3, "queue_time_p50_s": 0.01, "prefill_time_p50_s": 0.04}},
                          engine.kb)
    d = engine.diagnose(snap, with_probes=False)
    assert d.observations["ttft_mostly_outside_engine"].present
    assert "17% of ttft_p50_s" in d.observations["ttft_mostly_outside_engine"].detail
    assert {h.id for h in d.hypotheses[:2]} == {"gateway_saturation", "client_network_latency"}


def test_a_condition_on_a_second_signal_gates_the_finding(kb):
    """Requests waiting count as 'KV has room' only while KV usage is low; unknown until KV usage is measured."""
    def obs(current):
        return evaluate(kb, parse_snapshot({"current": current}, kb)).get("waiting_with_kv_room")

    room = obs({"requests_waiting": 16, "kv_cache_usage": 0.15})
    assert room.present and "kv_cache_usage 0.15" in room.detail
    assert obs({"requests_waiting": 16, "kv_cache_usage": 0.95}).present is False
    assert obs({"requests_waiting": 0, "kv_cache_usage": 0.15}).present is False
    assert obs({"requests_waiting": 16}) is None


def test_power_far_below_limit_while_util_reads_busy(kb):
    def obs(util, power):
        snap = parse_snapshot({"current": {"gpu_util": {"gpu0": util, "gpu1": util},
                                           "power_w": {"gpu0": power, "gpu1": 650},
                                           "power_limit_w": {"gpu0": 700, "gpu1": 700}}}, kb)
        return evaluate(kb, snap)["power_low_while_busy"]

    busy_cool = obs(0.97, 120)
    assert busy_cool.present and busy_cool.entities == ["gpu0"]
    assert not obs(0.97, 500).present
    assert not obs(0.3, 120).present   # idle GPUs draw little power: nothing misleading about that


def test_tensor_cores_going_idle_counts_only_while_sms_stay_busy(kb):
    def obs(sm_now):
        snap = parse_snapshot({"baseline": {"tensor_active": 0.42, "sm_active": 0.85},
                               "current": {"tensor_active": 0.02, "sm_active": sm_now}}, kb)
        return evaluate(kb, snap)["tensor_active_down_sm_busy"]

    assert obs(0.9).present            # same busy SMs, no tensor cores: FP32 or a non-tensor kernel path
    assert obs(0.1).present is False   # everything went idle: a stall, not a precision change


def test_left_baseline_value_reads_list_signals_as_membership(kb):
    from perfdoctor.engine.findings import _evaluate_rule
    from perfdoctor.kb.schema import Finding, Rule
    sig = kb.signals["throttle_reasons"]
    rule = Finding(id="sw_power_cap_gone", title="t", rule=Rule(left_baseline_value="sw_power_cap"), leak=0.01)

    def lost(now):
        snap = parse_snapshot({"baseline": {"throttle_reasons": {"gpu0": ["sw_power_cap"]}},
                               "current": {"throttle_reasons": {"gpu0": now}}}, kb)
        return _evaluate_rule(kb, snap, "throttle_reasons", sig, rule).present

    assert lost([]) and lost(["hw_slowdown"])
    assert not lost(["sw_power_cap", "hw_slowdown"])


def test_the_rank_the_others_wait_for_waits_least(kb):
    """Straggler signature from per-rank traces: three ranks spend ~40% in collectives, rank1 only 8%."""
    snap = parse_snapshot({"current": {"comm_time_frac": {"rank0": 0.4, "rank1": 0.08, "rank2": 0.42,
                                                          "rank3": 0.41}}}, kb)
    obs = evaluate(kb, snap)["comm_share_rank_low"]
    assert obs.present and obs.entities == ["rank1"]
    even = parse_snapshot({"current": {"comm_time_frac": {"rank0": 0.4, "rank1": 0.38, "rank2": 0.42}}}, kb)
    assert not evaluate(kb, even)["comm_share_rank_low"].present


def test_a_state_that_held_in_the_baseline_too_is_not_evidence(kb):
    """GPU util 97% before and 95% now: a busy GPU is how this service always runs, not what changed."""
    busy = evaluate(kb, parse_snapshot({"baseline": {"gpu_util": 0.97}, "current": {"gpu_util": 0.95}}, kb))
    assert busy["gpu_util_high"].present is None and "held in the baseline too" in busy["gpu_util_high"].detail
    new = evaluate(kb, parse_snapshot({"baseline": {"gpu_util": 0.6}, "current": {"gpu_util": 0.95}}, kb))
    assert new["gpu_util_high"].present
    no_baseline = evaluate(kb, parse_snapshot({"current": {"gpu_util": 0.95}}, kb))
    assert no_baseline["gpu_util_high"].present


def test_prefix_cache_compares_misses_not_hits(kb):
    """96% -> 90% hits is 2.5x the prefill work; 20% -> 15% hits barely changes it."""
    def hit_drop(before, now):
        snap = parse_snapshot({"baseline": {"prefix_cache_hit_rate": before},
                               "current": {"prefix_cache_hit_rate": now}}, kb)
        return evaluate(kb, snap)["prefix_hit_rate_down"]
    high = hit_drop(0.96, 0.90)
    assert high.present and "1 - prefix_cache_hit_rate" in high.detail
    assert not hit_drop(0.2, 0.15).present
    assert hit_drop(0.8, 0.4).present
