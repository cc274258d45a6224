"""The knowledge base: valid, complete for the contract ids, and `kb check` names file, entry and field."""
import re
import shutil

import pytest

from perfdoctor.kb.check import check_kb
from perfdoctor.kb.loader import load_kb

CONTRACT_ROOT_CAUSES = """load_surge prompt_length_growth output_length_growth kv_cache_exhaustion decode_memory_bound
prefill_compute_bound batching_underutilization host_cpu_bottleneck prefix_cache_degradation tensor_parallel_comm
kv_transfer_bottleneck gateway_saturation client_network_latency load_imbalance head_of_line_blocking
speculative_decoding_regression input_pipeline_stall storage_io_bottleneck gpu_throttling gpu_hardware_fault
pcie_link_degradation nvlink_degradation rdma_network_degradation gpudirect_rdma_disabled numa_affinity_misconfig
scale_out_comm_bound memory_pressure training_config_regression software_version_regression noisy_neighbor""".split()
CONTRACT_TECHNOLOGIES = """gqa flash_attention paged_attention speculative_decoding pd_disaggregation zero ray kubernetes
continuous_batching chunked_prefill prefix_caching quantization cuda_graphs tensor_parallelism pipeline_parallelism
data_parallelism expert_parallelism activation_checkpointing mixed_precision""".split()
CONTRACT_SIGNALS = """request_rate_rps ttft_p50_s ttft_p99_s itl_p50_s itl_p99_s e2e_p50_s e2e_p99_s queue_time_p50_s
queue_time_p99_s prefill_time_p50_s decode_time_p50_s output_tokens_per_s requests_running requests_waiting kv_cache_usage
preemptions_per_s prompt_tokens_mean output_tokens_mean prefix_cache_hit_rate spec_decode_acceptance_rate
kv_transfer_time_p50_s http_5xx_rate http_499_rate gateway_cpu_util client_rtt_ms main_thread_cpu_util gpu_util sm_active
tensor_active dram_active sm_clock_mhz power_w power_limit_w temp_c throttle_reasons fb_used_frac xid_errors ecc_dbe_errors
row_remap_failures pcie_link_gen pcie_link_width pcie_replay_rate nvlink_bw_gb_per_s nvlink_active_links step_time_s
tokens_per_s dataloader_wait_frac comm_time_frac gpu_idle_frac alloc_retries scaling_efficiency host_cpu_util
cpu_iowait_frac cpu_steal_frac disk_read_latency_ms storage_read_mb_per_s memory_available_frac numa_affinity_ok
ib_write_bw_gbit_per_s nccl_busbw_gb_per_s ib_symbol_errors ib_link_downed ib_xmit_wait_rate gdr_enabled
nccl_transport""".split()
CONTRACT_CHANGES = """driver_upgrade cuda_upgrade nccl_upgrade framework_upgrade container_image engine_upgrade model_version
prompt_template batch_config parallelism_config nodes_added network_config scheduler_config traffic_shift""".split()


def test_shipped_kb_has_no_errors_or_warnings(kb):
    assert [str(i) for i in check_kb(kb) if "no Chinese translation" not in i.message] == []


def test_every_user_facing_text_has_a_chinese_version(kb):
    missing = [str(i) for i in check_kb(kb) if "no Chinese translation" in i.message]
    assert missing == [], f"{len(missing)} missing, e.g. {missing[:3]}"


def test_translation_of_an_unknown_entry_is_an_error(kb_copy):
    (kb_copy / "i18n" / "zh" / "probes.yaml").write_text("no_such_probe: {title: 无}\n")
    assert "kb/i18n/zh/probes.yaml: no_such_probe: translation of an unknown probe" in _messages(kb_copy)


@pytest.mark.parametrize("rc", CONTRACT_ROOT_CAUSES)
def test_contract_root_cause_is_complete(kb, rc):
    entry = kb.root_causes[rc]
    assert entry.sources and entry.remedies and entry.mechanisms
    assert kb.source_file[rc] == f"kb/root_causes/{rc}.yaml"


@pytest.mark.parametrize("tech", CONTRACT_TECHNOLOGIES)
def test_contract_technology_names_its_failure_mode(kb, tech):
    t = kb.technologies[tech]
    assert t.kind == "technology" and t.cannot_fix and len(t.counterexample) > 20 and t.sources


def test_contract_vocabulary(kb):
    assert set(CONTRACT_SIGNALS) <= set(kb.signals)
    assert set(CONTRACT_CHANGES) <= set(kb.changes)


@pytest.fixture
def kb_copy(tmp_path):
    from perfdoctor.kb.loader import KB_DIR
    dst = tmp_path / "kb"
    shutil.copytree(KB_DIR, dst, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return dst


def _messages(root):
    return [str(i) for i in check_kb(load_kb(root)) if i.severity == "error"]


def test_dangling_mechanism_reference(kb_copy):
    path = kb_copy / "root_causes" / "load_surge.yaml"
    path.write_text(path.read_text().replace("target: queue_buildup", "target: queue_buildp"))
    assert "kb/root_causes/load_surge.yaml: load_surge: mechanisms[0].target: unknown mechanism 'queue_buildp'" in _messages(kb_copy)


def test_schema_error_names_the_field(kb_copy):
    path = kb_copy / "root_causes" / "gpu_throttling.yaml"
    path.write_text(re.sub(r"^prior: .*$", "prior: 1.5", path.read_text(), flags=re.M))
    msgs = _messages(kb_copy)
    assert any(m.startswith("kb/root_causes/gpu_throttling.yaml: gpu_throttling: prior: ") for m in msgs)


def test_duplicate_yaml_key_is_an_error(kb_copy):
    path = kb_copy / "root_causes" / "noisy_neighbor.yaml"
    path.write_text(path.read_text() + "prior: 0.5\n")
    assert any("noisy_neighbor.yaml: line" in m and "duplicate key 'prior'" in m for m in _messages(kb_copy))


def test_id_must_match_file_name(kb_copy):
    (kb_copy / "root_causes" / "load_surge.yaml").rename(kb_copy / "root_causes" / "surge.yaml")
    assert "kb/root_causes/surge.yaml: load_surge: id: must equal the file name 'surge'" in _messages(kb_copy)


def test_signal_without_probe_and_unknown_retest(kb_copy):
    probes = kb_copy / "probes.yaml"
    probes.write_text(probes.read_text().replace("fills: [near_client_restores, client_rtt_ms]",
                                                       "fills: [near_client_restores, client_rtt_msec]"))
    msgs = _messages(kb_copy)
    assert "kb/probes.yaml: client_rtt: fills[1]: unknown signal 'client_rtt_msec'" in msgs
    assert "kb/signals/service.yaml: client_rtt_ms: no probe fills this signal" in msgs


def test_before_from_must_name_a_signal(kb_copy):
    path = kb_copy / "root_causes" / "software_version_regression.yaml"
    path.write_text(path.read_text().replace("before_from: [other_engine_same_load]", "before_from: [other_engine_fast]"))
    assert ("kb/root_causes/software_version_regression.yaml: software_version_regression: scope.before_from[0]: "
            "unknown signal 'other_engine_fast'") in _messages(kb_copy)


def test_mechanism_cannot_point_at_a_mechanism(kb_copy):
    mech = kb_copy / "mechanisms.yaml"
    mech.write_text(mech.read_text() + """- id: loop_a
  title: a
  description: a
  bottlenecks: [compute]
  leak: 0.01
  effects: [{target: queue_buildup, strength: 0.5}]
  sources: [https://example.org]
""")
    msgs = _messages(kb_copy)
    assert any("loop_a: effects[0].target: unknown finding 'queue_buildup'" in m for m in msgs)


def test_finding_cannot_be_both_effect_and_signature(kb_copy):
    path = kb_copy / "root_causes" / "load_surge.yaml"
    path.write_text(path.read_text().replace("target: request_rate_up", "target: waiting_up"))
    assert any("waiting_up: finding is both a mechanism effect and a root-cause signature" in m for m in _messages(kb_copy))


def test_modes_must_exist_and_own_their_findings(kb_copy):
    path = kb_copy / "root_causes" / "pcie_link_degradation.yaml"
    path.write_text(path.read_text().replace("mode: width_downtrained", "mode: width_downtraind", 1))
    other = kb_copy / "root_causes" / "nvlink_degradation.yaml"
    other.write_text(other.read_text().replace("- target: xid_present\n", "- target: pcie_gen_down\n", 1))
    msgs = _messages(kb_copy)
    assert any("pcie_link_degradation:" in m and ".mode: unknown mode 'width_downtraind'" in m for m in msgs)
    assert any("'pcie_gen_down' belongs to mode 'gen_downtrained', so no other cause may claim it (nvlink_degradation)"
               in m for m in msgs)


def test_a_bound_needs_exactly_one_side(kb_copy):
    path = kb_copy / "signals" / "gpu.yaml"
    path.write_text(path.read_text().replace("{fraction_of: {signal: power_limit_w, below: 0.35}",
                                             "{fraction_of: {signal: power_limit_w, below: 0.35, above: 0.9}", 1))
    assert any("gpu.yaml" in m and "fraction_of" in m and "needs exactly one of above or below" in m
               for m in _messages(kb_copy))


def test_a_condition_needs_exactly_one_bound(kb_copy):
    """A `when` condition takes above, below or the inclusive at_least; two of them is an error naming the key."""
    path = kb_copy / "signals" / "gpu.yaml"
    path.write_text(path.read_text().replace("when: {signal: gpu_util, at_least: 0.3,",
                                             "when: {signal: gpu_util, at_least: 0.3, above: 0.2,", 1))
    msgs = [m for m in _messages(kb_copy) if "sm_clock_mhz: findings[0]" in m]
    assert msgs == ["kb/signals/gpu.yaml: sm_clock_mhz: findings[0].rule.when: Value error, needs exactly one of "
                    "above, below or at_least"]


def test_an_added_share_needs_one_bound_and_known_parts(kb_copy):
    path = kb_copy / "signals" / "training.yaml"
    text = path.read_text()
    path.write_text(text.replace("{added_share: {parts: [dataloader_wait_frac], above: 0.7}}",
                                 "{added_share: {parts: [dataloader_wait_frac], above: 0.7, below: 0.9}}", 1))
    assert any("training.yaml" in m and "added_share" in m and "needs exactly one of above or below" in m
               for m in _messages(kb_copy))
    path.write_text(text.replace("{added_share: {parts: [comm_time_frac], above: 0.7}",
                                 "{added_share: {parts: [comm_time_fraction], above: 0.7}", 1))
    assert any("comm_time_fraction" in m for m in _messages(kb_copy))


def test_unless_changed_names_a_known_change(kb_copy):
    net = kb_copy / "signals" / "network.yaml"
    net.write_text(net.read_text().replace("unless_changed: [nodes_added]}", "unless_changed: [nodes_grown]}", 1))
    assert any(m.endswith("findings.nccl_transport_changed.rule.unless_changed: unknown change 'nodes_grown'")
               for m in _messages(kb_copy)), _messages(kb_copy)


def test_complement_needs_a_ratio_rule_on_a_fraction(kb_copy):
    svc = kb_copy / "signals" / "service.yaml"
    svc.write_text(svc.read_text().replace("rule: {ratio_down: 0.75}", "rule: {ratio_down: 0.75, complement: true}", 1))
    assert any("findings.running_batch_down.rule.complement: complement applies to a ratio rule on a fraction signal"
               in m for m in _messages(kb_copy)), _messages(kb_copy)


def test_ratio_metric_without_denominator_is_an_error(kb_copy):
    path = kb_copy / "signals" / "host.yaml"
    path.write_text(path.read_text().replace(', denominator: "node_memory_MemTotal_bytes"', "", 1))
    msgs = _messages(kb_copy)
    assert any("host.yaml" in m and "ratio_of_gauges needs a denominator metric" in m for m in msgs), msgs
