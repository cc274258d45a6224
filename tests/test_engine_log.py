"""vLLM / SGLang server logs: real excerpts from public issues (tests/fixtures/engine_logs/SOURCES.md)."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfdoctor.cli import cli
from perfdoctor.symptoms.artifacts import PARSERS, detect_kind, load_artifact
from perfdoctor.yamlio import load_text

LOGS = Path(__file__).resolve().parent / "fixtures" / "engine_logs"
V0_PENDING = LOGS / "vllm_v0_0.4.1_llama3_8b_rtx3090_pending.log"
V1_WAITING = LOGS / "vllm_v1_0.10.1.1_qwen2_7b_a100_tp2_waiting.log"
V1_IDLE = LOGS / "vllm_v1_0.8.5.post1_deepseek_r1_14b_startup_idle.log"
V0_SERIAL = LOGS / "vllm_v0_unknown_t4_mistral7b_gptq_serial.log"
SG_STARTUP = LOGS / "sglang_0.4.3.post4_qwq32b_4xl4_tp4_startup.log"
P2P_OFF = LOGS / "vllm_0.23_tp2_5060ti_p2p_off.log"
P2P_ON = LOGS / "vllm_0.23_tp2_5060ti_p2p_on.log"


@pytest.mark.parametrize("path", sorted(LOGS.glob("*.log")), ids=lambda p: p.name)
def test_every_real_log_is_an_engine_log_and_nothing_else(path):
    text = path.read_text()
    # the V1 excerpt interleaves the benchmark client's result blocks with the server's lines (as its README does)
    also = ["bench_serving"] if path == V1_WAITING else []
    assert [k for k, det, _ in PARSERS if det(text)] == ["engine_log", *also]
    assert detect_kind(text) == "engine_log"
    art = load_artifact(str(path))
    assert art.kind == "engine_log"
    assert {"requests_running", "requests_waiting", "kv_cache_usage"} <= art.signals.keys()
    assert all(0 <= v <= 1 for v in art.signals["kv_cache_usage"].values())


def test_vllm_v0_kv_full_with_a_long_queue():
    """0.4.1 on a 3090: six status lines, 92-119 running, 323 -> 162 pending, KV 98-99%."""
    art = load_artifact(str(V0_PENDING))
    assert art.signals["requests_running"] == {"engine0": pytest.approx(647 / 6)}
    assert art.signals["requests_waiting"] == {"engine0": pytest.approx(1430 / 6)}
    assert art.signals["kv_cache_usage"]["engine0"] == pytest.approx(0.9873, abs=1e-4)
    assert art.signals["prefix_caching"] is False          # enable_prefix_caching=False in the engine config
    assert art.signals["cuda_graphs"] is True              # enforce_eager=False
    assert art.context["vllm"] == "0.4.1" and art.context["tp"] == 1
    assert any("peaked at 99%" in n for n in art.notes)
    assert "preemptions_per_s" not in art.signals          # V0 warns only every 50th preemption: silence is no reading


def test_vllm_v1_waiting_and_prefix_hits():
    art = load_artifact(str(V1_WAITING))
    assert art.signals["requests_waiting"]["engine0"] > 100
    assert 0 < art.signals["prefix_cache_hit_rate"]["engine0"] < 1
    assert "preemptions_per_s" not in art.signals          # V1 logs no preemptions at all
    # "Avg prompt throughput" of the busy status lines (2547.3, 2438.4, ... 102.2 tokens/s), averaged
    assert art.signals["prompt_tokens_per_s"]["engine0"] == pytest.approx(1069.8, abs=0.1)


def test_vllm_v1_idle_log_keeps_settings_and_says_it_is_idle():
    art = load_artifact(str(V1_IDLE))
    assert art.signals["requests_running"] == {"engine0": 0.0}
    assert any("idle" in n for n in art.notes)
    assert art.signals["kv_cache_capacity_tokens"] == {"engine0": 32832}   # "GPU KV cache size: 32,832 tokens"
    assert art.context["vllm"] == "0.8.5.post1"


def test_idle_lines_do_not_dilute_the_busy_ones():
    art = load_artifact(str(V0_SERIAL))
    assert art.signals["requests_running"] == {"engine0": 1.0}
    assert any("18 busy status lines of 19" in n for n in art.notes)


def test_sglang_startup_settings():
    art = load_artifact(str(SG_STARTUP))
    assert art.context["tp"] == 4
    assert art.signals["kv_cache_capacity_tokens"] == {"engine0": 46611}   # the same line from TP0..TP3
    assert art.signals["chunked_prefill"] is True          # chunked_prefill_size=2048
    assert art.signals["prefix_caching"] is True           # disable_radix_cache=False
    assert art.signals["prefix_cache_hit_rate"] == {"engine0": 0.0}   # one prefill, #cached-token: 0
    # server_args say disable_custom_all_reduce=False, but on four PCIe-only L4s each TP rank then logs
    # "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs"
    assert art.signals["custom_allreduce"] is False


def test_sglang_prefix_hits_from_cached_tokens_and_graphs_from_the_decode_lines():
    """A recent SGLang under light load: 26 prefills, 33 decode batches, all printed 'cuda graph: False'."""
    art = load_artifact(str(LOGS / "sglang_unknown_qwen25_7b_awq_light_prefix_cache.log"))
    assert art.signals["prefix_cache_hit_rate"]["engine0"] == pytest.approx(0.1712, abs=1e-4)   # cached / (new + cached)
    assert art.signals["cuda_graphs"] is False
    assert "33 of 33 decode batches ran without CUDA graphs" in art.notes
    assert art.signals["kv_cache_capacity_tokens"] == {"engine0": 133052}
    assert art.signals["preemptions_per_s"] == {"engine0": 0.0}     # SGLang logs every retraction: none here
    assert art.context["engine"] == "sglang"


# Lines below are copied from the real logs above and changed only where a test needs another value.

def test_sglang_retractions_become_a_rate_and_graphs_a_majority(tmp_path):
    decode = ("[2025-09-01 05:12:{:02d} TP0] Decode batch. #running-req: 113, #token: 31546, token usage: 0.88, "
              "cuda graph: {}, gen throughput (token/s): 45.24, #queue-req: 399")
    lines = [decode.format(s, "False" if s < 40 else "True") for s in range(0, 60, 10)]
    lines.insert(2, "[2025-09-01 05:12:15 TP0] Decode out of memory happened. #retracted_reqs: 3, "
                    "#new_token_ratio: 0.4567 -> 0.7000")
    p = tmp_path / "sglang.log"
    p.write_text("\n".join(lines) + "\n")
    art = load_artifact(str(p))
    assert art.signals["preemptions_per_s"] == {"engine0": pytest.approx(3 / 50)}
    assert art.signals["cuda_graphs"] is False             # 4 of 6 decode batches ran without graphs
    assert any("4 of 6 decode batches" in n for n in art.notes)


def test_vllm_v0_preemption_warnings_give_a_lower_bound(tmp_path):
    stats = V0_PENDING.read_text().splitlines()[47:53]
    warn = ("WARNING 05-04 15:16:{:02d} scheduler.py:1089] Sequence group {} is preempted by PreemptionMode.RECOMPUTE "
            "mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
            "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
            "total_num_cumulative_preemption={}")
    p = tmp_path / "v0.log"
    p.write_text("\n".join([stats[0], warn.format(0, 17, 1), *stats[1:], warn.format(20, 90, 51)]) + "\n")
    art = load_artifact(str(p))
    assert art.signals["preemptions_per_s"] == {"engine0": pytest.approx(51 / 26)}   # 15:15:56 .. 15:16:22
    assert any("at least 51 preemptions" in n for n in art.notes)


def test_data_parallel_engines_are_peers(tmp_path):
    line = ("(APIServer pid=1) INFO 05-19 10:13:11 [loggers.py:271] Engine 00{}: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 1055.3 tokens/s, Running: {} reqs, Waiting: {} reqs, GPU KV cache usage: "
            "95.9%, Prefix cache hit rate: 0.0%")
    p = tmp_path / "dp.log"
    p.write_text(line.format(0, 18, 43) + "\n" + line.format(1, 2, 0) + "\n")
    art = load_artifact(str(p))
    assert art.signals["requests_running"] == {"engine0": 18.0, "engine1": 2.0}
    assert art.signals["requests_waiting"] == {"engine0": 43.0, "engine1": 0.0}


def test_cut_status_line_is_reported_not_dropped(tmp_path):
    text = V0_PENDING.read_text().splitlines()
    p = tmp_path / "cut.log"
    p.write_text("\n".join(text[:52] + [text[52][:120]]) + "\n")
    art = load_artifact(str(p))
    assert art.signals["requests_running"] == {"engine0": pytest.approx((647 - 108) / 5)}
    assert any(n.startswith("line 53: status line not understood") for n in art.notes)


def test_a_log_without_status_lines_is_an_error(tmp_path):
    p = tmp_path / "startup_only.log"
    p.write_text("\n".join(V0_PENDING.read_text().splitlines()[:10]) + "\n")
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", f"engine_log={p}"])
    assert result.exit_code == 2
    assert f"{p}:10" in result.output and "status lines" in result.output


def test_baseline_artifact_fills_the_baseline(tmp_path):
    """A log from the good state as the baseline: the queue that grew shows as a change."""
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(V0_PENDING), "--baseline-artifact", str(V0_SERIAL),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    snap = load_text(out.read_text(), str(out))
    assert snap["baseline"]["requests_waiting"] == {"engine0": 0.0}
    assert snap["current"]["requests_waiting"]["engine0"] > 200
    assert snap["context"]["versions"]["vllm"] == "0.4.1"      # from the current log; a baseline adds no context
    result = CliRunner().invoke(cli, ["diagnose", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "waiting_up" in result.output


def test_the_attention_backend_each_log_names():
    """One spelling per backend across versions: SGLang's server args, vLLM 0.4's 'Using XFormers backend',
    V1's 'Using Flash Attention backend on V1 engine'; a log that names none gives none."""
    assert load_artifact(str(SG_STARTUP)).context["attention_backend"] == "flashinfer"
    assert load_artifact(str(V0_PENDING)).context["attention_backend"] == "xformers"
    assert load_artifact(str(V1_IDLE)).context["attention_backend"] == "flashattn"
    assert "attention_backend" not in load_artifact(str(V0_SERIAL)).context


def test_a_different_attention_backend_before_and_now_is_a_backend_change(tmp_path):
    """The good state's log ran XFormers (vLLM 0.4.1) and the slow one Flash Attention (0.8.5): op_backend_changed,
    named in the warnings. The same backend on both sides says nothing (other kernels may still differ)."""
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(V1_IDLE), "--baseline-artifact", str(V0_PENDING),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    snap = load_text(out.read_text(), str(out))
    assert snap["current"]["op_backend_changed"] is True
    result = CliRunner().invoke(cli, ["diagnose", "--artifact", str(V1_IDLE), "--baseline-artifact", str(V0_PENDING),
                                      "--format", "json"])
    assert "attention backend xformers before and flashattn now" in result.output
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(V0_PENDING), "--baseline-artifact", str(V0_PENDING),
                                      "-o", str(out)])
    assert "op_backend_changed" not in load_text(out.read_text(), str(out))["current"]


def test_nccl_lines_inside_a_vllm_log_say_p2p_was_switched_off():
    """vLLM 0.23 with TP=2 and NCCL_DEBUG=INFO: the off run's workers log NCCL_P2P_DISABLE set by the environment
    and channels via SHM; the on run only NCCL_CUMEM_ENABLE (named, not classed) and channels via P2P/CUMEM.
    Both name the hybrid model's mamba pages, the TRITON_ATTN backend, the KV pool and the batch cap of 1."""
    off, on = load_artifact(str(P2P_OFF)), load_artifact(str(P2P_ON))
    assert off.signals["nccl_env_overrides"] == ["p2p_off"] and off.signals["nccl_transport"] == "SHM"
    assert on.signals["nccl_env_overrides"] == [] and on.signals["nccl_transport"] == "P2P/IPC"
    assert any("NCCL_CUMEM_ENABLE=1" in n for n in on.notes)
    for art, pool in ((off, 97684), (on, 96447)):
        assert art.signals["hybrid_kv_cache"] == ["mamba_state"]
        assert art.signals["kv_cache_capacity_tokens"] == {"engine0": pool}
        assert art.signals["custom_allreduce"] is False
        assert art.context["attention_backend"] == "tritonattn" and art.context["vllm"] == "0.23.0"
        assert art.context["tp"] == 2 and art.context["max_num_seqs"] == 1 and art.context["nccl"] == "2.28.9"


def test_the_p2p_off_log_against_the_p2p_on_log_points_at_the_gpu_link():
    """The on run as the baseline, the off run as the current state: P2P switched off by the environment ranks a
    PCIe or NVLink cause above a version regression (nothing was upgraded: same image, same flags)."""
    result = CliRunner().invoke(cli, ["diagnose", "--artifact", str(P2P_OFF), "--baseline-artifact", str(P2P_ON),
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    assert d["hypotheses"][0]["id"] in ("pcie_link_degradation", "nvlink_degradation", "tensor_parallel_comm")


def test_the_nccl_lines_alone_are_an_nccl_log(tmp_path):
    """A rank's output with NCCL_DEBUG=INFO but no engine status lines (here the NCCL lines of the P2P-off log, as
    a training rank would print them) is kind nccl_log: transport, environment settings and NCCL version."""
    lines = [l for l in P2P_OFF.read_text().splitlines() if " NCCL INFO " in l]
    path = tmp_path / "rank0.log"
    path.write_text("\n".join(lines) + "\n")
    assert detect_kind(path.read_text()) == "nccl_log"
    art = load_artifact(str(path))
    assert art.signals == {"nccl_transport": "SHM", "nccl_env_overrides": ["p2p_off"]}
    assert art.context["nccl"] == "2.28.9" and art.context["nccl_intra_transport"] == "SHM/direct"
    (tmp_path / "quiet.log").write_text("host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    with pytest.raises(Exception, match="NCCL_DEBUG_SUBSYS=INIT,ENV,NET"):
        load_artifact(str(tmp_path / "quiet.log"))


def test_split_one_log_into_the_good_and_the_slow_state(tmp_path):
    """The V1 log's first three status lines (05:30:59-05:31:19) are the baseline, the rest the current state."""
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(V1_WAITING), "--split-at", "05:36", "-o", str(out)])
    assert result.exit_code == 0, result.output
    snap = load_text(out.read_text(), str(out))
    assert snap["baseline"]["requests_waiting"] == {"engine0": pytest.approx((70 + 46 + 20) / 3)}
    assert snap["current"]["requests_waiting"]["engine0"] > 200
    assert snap["context"]["workload"] == "inference"
    header = out.read_text()                              # the notes head the written snapshot
    assert "baseline: the status lines before 09-04 05:36:00 (6 others left out)" in header
    assert "current: the status lines from 09-04 05:36:00 (3 others left out)" in header
    full = CliRunner().invoke(cli, ["snapshot", "--artifact", str(V1_WAITING), "--split-at", "2026-09-04 05:36:00"])
    assert full.exit_code == 0 and "6 others left out" in full.output   # vLLM's stamps carry no year: any year fits


@pytest.mark.parametrize("args,problem", [
    (["--artifact", str(V1_WAITING), "--split-at", "07:00"], "no status line from 09-04 07:00:00"),
    (["--artifact", str(V1_WAITING), "--split-at", "7pm"], "expected a time such as 14:05"),
    (["--artifact", str(V0_SERIAL), "--split-at", "05:36"], "no status line before 11-01 05:36:00"),
])
def test_split_errors_name_the_problem(args, problem):
    result = CliRunner().invoke(cli, ["snapshot", *args])
    assert result.exit_code == 2 and problem in result.output, result.output


def test_split_needs_a_server_log(tmp_path):
    bench = Path(__file__).resolve().parent / "fixtures" / "bench_serving" / "vllm_0.10.1.1_qwen2_7b_2xa100_10prompts_good.txt"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(bench), "--split-at", "05:36"])
    assert result.exit_code == 2 and "no --artifact is one" in result.output
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", f"bench_serving={bench}", "--artifact", str(V1_WAITING),
                                      "--split-at", "05:36"])
    assert result.exit_code == 0, result.output          # the log is split, the benchmark goes to the current state
