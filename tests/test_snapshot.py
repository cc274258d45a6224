"""Snapshot validation: every bad input names file, key and problem; doubtful values become warnings."""
import json

import pytest

from perfdoctor.errors import InputError
from perfdoctor.symptoms.snapshot import load_snapshot


def write(tmp_path, text, name="snap.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_percent_for_a_fraction_is_converted_with_a_warning(kb, tmp_path):
    snap = load_snapshot(write(tmp_path, "current: {sm_active: 45, dram_active: {gpu0: 95, gpu1: 0.9}}"), kb)
    assert snap.current["sm_active"] == pytest.approx(0.45)
    assert snap.current["dram_active"] == {"gpu0": pytest.approx(0.95), "gpu1": pytest.approx(0.9)}
    assert any("current.sm_active: 45 looks like a percent; read as 0.45" in w for w in snap.warnings)
    assert any("current.dram_active.gpu0" in w for w in snap.warnings)


def test_unknown_signal_and_change_are_warnings_not_errors(kb, tmp_path):
    snap = load_snapshot(write(tmp_path, "changes: [prompt_template, moon_phase]\ncurrent: {e2e_p99_s: 2, gpu_vibes: 3}"), kb)
    assert snap.changes == ["prompt_template"]
    assert "gpu_vibes" not in snap.current
    assert any("current.gpu_vibes: unknown signal" in w for w in snap.warnings)
    typo = load_snapshot(write(tmp_path, "current: {ttft_p99: 2, e2e_p99_s: 2}\nchanges: [driver_update]", "t.yaml"), kb)
    assert any("did you mean ttft_p99_s" in w for w in typo.warnings)
    assert any("did you mean driver_upgrade" in w for w in typo.warnings)
    assert any("unknown change 'moon_phase'" in w for w in snap.warnings)


@pytest.mark.parametrize("text, key, problem", [
    ("current: {kv_cache_usage: 250}", "current.kv_cache_usage", "outside the valid range"),
    ("current: {e2e_p99_s: -1}", "current.e2e_p99_s", "outside the valid range"),
    ("current: {e2e_p99_s: fast}", "current.e2e_p99_s", "expected a number"),
    ("current: {gdr_enabled: 1}", "current.gdr_enabled", "expected true or false"),
    ("current: {throttle_reasons: {gpu0: 3}}", "current.throttle_reasons.gpu0", "expected a list of strings"),
    ("current: {sm_clock_mhz: {}}", "current.sm_clock_mhz", "empty per-entity mapping"),
    ("current: {gpu_util: 0.5}\nchanges: {prompt_template: true}", "changes", "must be a list"),
    ("current: {gpu_util: 0.5}\ncontext: {nodes: four}", "context.nodes", "expected int"),
    ("current: {gpu_util: 0.5}\ncontext: {workload: gaming}", "context.workload", "must be 'inference' or 'training'"),
    ("current: {gpu_util: 0.5}\ncontext: {slo: {e2e_p99_s: 0}}", "context.slo.e2e_p99_s", "positive number"),
    ("current: {gpu_util: 0.5}\nbaseline: [1, 2]", "baseline", "must be a mapping"),
    ("current: {nothing_known: 1}", "current", "no known signal observed"),
    ("- just\n- a list", "", "must be a mapping"),
    ("current: {gpu_util: 0.5, gpu_util: 0.6}", "line 1", "duplicate key 'gpu_util'"),
    ("current: {gpu_util: [0.5", "line 1", ""),
    ("? [a, b]\n: 1\ncurrent: {gpu_util: 0.5}", "line 1", "a mapping key must be a plain value"),
    ("current: {output_tokens_per_s: 1" + "0" * 400 + "}", "current.output_tokens_per_s", "number too large"),
    ("current: {gpu_util: 0.5}\ncontext: {slo: {e2e_p99_s: .nan}}", "context.slo.e2e_p99_s", "positive number"),
    ("current: {gpu_util: 0.5}\ncontext: {model_params_b: .inf}", "context.model_params_b", "not a finite number"),
    ("current: {gpu_util: 0.5}\ncontext: {tp: 0}", "context.tp", "must be positive"),
    ("current: {gpu_util: 0.5}\ncontext: {gpu_memory_utilization: 5}", "context.gpu_memory_utilization", "(0, 1]"),
    ("current: {gpu_util: 0.5\x07}", "byte", "unacceptable character #x0007"),
])
def test_bad_input_names_file_key_and_problem(kb, tmp_path, text, key, problem):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        load_snapshot(path, kb)
    message = str(exc.value)
    assert message.startswith(str(path))
    assert key in message and problem in message
    assert "\n" not in message


def test_missing_file(kb, tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_snapshot(tmp_path / "nope.yaml", kb)


def test_json_snapshot_and_duplicate_key_in_json(kb, tmp_path):
    snap = load_snapshot(write(tmp_path, json.dumps({"current": {"e2e_p99_s": 2.5}}), "s.json"), kb)
    assert snap.current == {"e2e_p99_s": 2.5}
    with pytest.raises(InputError, match="duplicate key"):
        load_snapshot(write(tmp_path, '{"current": {"e2e_p99_s": 1, "e2e_p99_s": 2}}', "d.json"), kb)


def test_values_with_units_and_loose_layouts(kb, tmp_path):
    """What people paste mid-incident: before/after, '800ms', '45%', one change as a string."""
    snap = load_snapshot(write(tmp_path, "before: {e2e_p99_s: 800ms, sm_active: '40%'}\n"
                                         "after: {e2e_p99_s: 2.5 s, kv_cache_usage: 94%, gdr_enabled: false}\n"
                                         "changes: prompt_template\n"), kb)
    assert snap.baseline == {"e2e_p99_s": pytest.approx(0.8), "sm_active": pytest.approx(0.4)}
    assert snap.current["e2e_p99_s"] == 2.5 and snap.current["kv_cache_usage"] == pytest.approx(0.94)
    assert snap.changes == ["prompt_template"]
    bare = load_snapshot(write(tmp_path, "e2e_p99_s: 2.5\nsm_active: 0.4\n", "bare.yaml"), kb)
    assert bare.current == {"e2e_p99_s": 2.5, "sm_active": 0.4}
    assert any("signals at the top level, read as current" in w for w in bare.warnings)


def test_a_unit_that_does_not_fit_is_an_error(kb, tmp_path):
    with pytest.raises(InputError, match=r"current.e2e_p99_s: unit 'GB' does not fit this signal \(expected s\)"):
        load_snapshot(write(tmp_path, "current: {e2e_p99_s: 5 GB}"), kb)


def test_merge_keys_and_jitter_above_one(kb, tmp_path):
    snap = load_snapshot(write(tmp_path, "b: &b {gpu_util: 1.02}\ncurrent: {<<: *b, sm_active: 0.3}\n"), kb)
    assert snap.current == {"gpu_util": 1.0, "sm_active": 0.3}
    assert any("just above 1" in w for w in snap.warnings)


def test_other_units_and_exporter_gauge_names_are_read_as_signals(kb, tmp_path):
    text = ("baseline: {ttft_p99_ms: 250, gpu_util_pct: {gpu0: 40}}\n"
            "current: {ttft_p99_ms: '1600', e2e_p50_min: 0.5, DCGM_FI_DEV_GPU_UTIL: {gpu0: 95},\n"
            "          DCGM_FI_DEV_SM_CLOCK_HERTZ: {gpu0: 1.41e9}, 'vllm:num_requests_waiting': 22,\n"
            "          gpu_cache_usage_perc: 0.94}")
    snap = load_snapshot(write(tmp_path, text), kb)
    assert snap.baseline == {"ttft_p99_s": pytest.approx(0.25), "gpu_util": {"gpu0": pytest.approx(0.4)}}
    assert snap.current["ttft_p99_s"] == pytest.approx(1.6)
    assert snap.current["e2e_p50_s"] == pytest.approx(30)
    assert snap.current["gpu_util"] == {"gpu0": pytest.approx(0.95)}   # dcgm-exporter reports 0-100
    assert snap.current["sm_clock_mhz"] == {"gpu0": pytest.approx(1410)}
    assert snap.current["requests_waiting"] == 22
    assert snap.current["kv_cache_usage"] == pytest.approx(0.94)   # vLLM's *_perc gauge is already 0-1
    assert any("current.ttft_p99_ms: read as ttft_p99_s (ms -> s)" in w for w in snap.warnings)
    assert any("current.DCGM_FI_DEV_GPU_UTIL: read as gpu_util (the exporter metric, x0.01)" in w for w in snap.warnings)


def test_a_signal_given_under_two_names_is_an_error(kb, tmp_path):
    path = write(tmp_path, "current: {ttft_p99_s: 1.6, ttft_p99_ms: 1600}")
    with pytest.raises(InputError, match=r"current.ttft_p99_ms: ttft_p99_s is given twice"):
        load_snapshot(path, kb)


def test_nothing_known_names_the_unknown_keys(kb, tmp_path):
    path = write(tmp_path, "current: {gpu_utilization: 0.9, throughput: 10}")
    with pytest.raises(InputError) as exc:
        load_snapshot(path, kb)
    assert "no known signal observed (unknown: current.gpu_utilization, current.throughput)" in str(exc.value)
