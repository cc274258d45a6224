"""Serving benchmark results (vLLM benchmark_serving / vllm bench serve, SGLang bench_serving): real blocks from
public issues, PRs and a README (tests/fixtures/bench_serving/SOURCES.md)."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfdoctor.cli import cli
from perfdoctor.errors import InputError
from perfdoctor.symptoms.artifacts import PARSERS, load_artifact
from perfdoctor.yamlio import load_text

BENCH = Path(__file__).resolve().parent / "fixtures" / "bench_serving"
LOGS = Path(__file__).resolve().parent / "fixtures" / "engine_logs"
GOOD = BENCH / "vllm_0.10.1.1_qwen2_7b_2xa100_10prompts_good.txt"
SLOW = BENCH / "vllm_0.10.1.1_qwen2_7b_2xa100_50prompts_slow.txt"


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.txt")), ids=lambda p: p.name)
def test_every_real_block_is_a_bench_result_and_nothing_else(path):
    text = path.read_text()
    assert [k for k, det, _ in PARSERS if det(text)] == ["bench_serving"]
    art = load_artifact(str(path))
    assert art.kind == "bench_serving" and art.signals
    assert all(v > 0 for v in art.signals.values())
    assert "client-side" in art.notes[0]


@pytest.mark.parametrize("path", sorted(LOGS.glob("*.log")), ids=lambda p: p.name)
def test_engine_logs_are_not_bench_results(path):
    # one engine-log excerpt interleaves two benchmark runs' result blocks with the server's lines
    problem = "2 result blocks" if "0.10.1.1" in path.name else "no latency or throughput row"
    with pytest.raises(InputError, match=problem):
        load_artifact(str(path), "bench_serving")


def test_vllm_block_units_and_means():
    art = load_artifact(str(GOOD))
    assert art.signals == {"ttft_p50_s": 2.24491, "ttft_p99_s": 3.34614, "itl_p50_s": 0.04239, "itl_p99_s": 0.05104,
                           "request_rate_rps": 0.21, "output_tokens_per_s": 218.04,
                           "prompt_tokens_mean": 1023.9, "output_tokens_mean": 1024.0}
    assert art.context["duration_s"] == 46.96
    defs = art.context["metric_definitions"]
    assert set(defs) == set(art.signals)
    assert "'Median ITL (ms)' row, measured on the client" in defs["itl_p50_s"]   # ITL, not TPOT
    assert "not arrivals" in defs["request_rate_rps"]


def test_the_report_says_how_each_reading_was_measured(tmp_path):
    out = tmp_path / "snap.yaml"
    CliRunner().invoke(cli, ["snapshot", "--artifact", str(SLOW), "--baseline-artifact", str(GOOD), "-o", str(out)])
    result = CliRunner().invoke(cli, ["diagnose", str(out), "--format", "markdown"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("- `ttft_p50_s`"))
    assert "Median time from request arrival" in line                       # the KB's definition
    assert "As measured here: the serving benchmark's 'Median TTFT (ms)' row, measured on the client" in line


def test_old_headerless_quoted_format():
    """vLLM 0.3.3 (March 2024) printed 'Median TTFT: 96.76 ms', pasted here as a Markdown quote."""
    art = load_artifact(str(BENCH / "vllm_0.3.3_llama7b_8xl40_tp8_old_format_quoted.txt"))
    assert art.signals["ttft_p50_s"] == pytest.approx(0.09676)
    assert art.signals["itl_p50_s"] == pytest.approx(0.04447)     # from TPOT: that version had no ITL rows
    assert art.signals["prompt_tokens_mean"] == 259.0               # 25900 input tokens over 100 requests
    assert any("read from TPOT" in n for n in art.notes)


def test_settings_above_the_header_and_an_annotated_value():
    art = load_artifact(str(BENCH / "vllm_unknown_concurrency30_slow_ttft.txt"))
    assert art.context["client_concurrency"] == 30                  # printed above the block
    assert "request_rate_configured" not in art.context             # "inf": no rate limit
    art = load_artifact(str(BENCH / "vllm_unknown_tp2_base_failed_peak_annotated.txt"))
    assert art.signals["ttft_p50_s"] == pytest.approx(0.02744)
    assert any("'<========' after the number ignored" in n for n in art.notes)


def test_cut_blocks_keep_their_rows_and_say_so():
    art = load_artifact(str(BENCH / "sglang_unknown_rate330_conc330_truncated.txt"))
    assert art.context["client_concurrency"] == 330 and art.context["request_rate_configured"] == 330
    assert art.signals["e2e_p50_s"] == pytest.approx(26.00141)
    assert "itl_p99_s" not in art.signals
    assert any("cut off after line 24" in n for n in art.notes)


def test_rows_of_another_run_above_the_header_are_not_mixed_in():
    art = load_artifact(str(BENCH / "vllm_unknown_pd_rps65_block_tail_and_head_partial.txt"))
    assert "itl_p50_s" not in art.signals and "e2e_p50_s" not in art.signals   # they belong to the run above
    assert art.signals["request_rate_rps"] == 4.17
    assert any("9 result rows above the header (lines 1-10) ignored" in n for n in art.notes)


def test_two_runs_in_one_file_is_an_error(tmp_path):
    p = tmp_path / "both.txt"
    p.write_text(GOOD.read_text() + "\n" + SLOW.read_text())
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(p)])
    assert result.exit_code == 2
    assert f"{p}:23" in result.output and "2 result blocks" in result.output


def test_good_and_slow_runs_make_a_baseline_and_a_current(tmp_path):
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(SLOW), "--baseline-artifact", str(GOOD), "-o", str(out)])
    assert result.exit_code == 0, result.output
    snap = load_text(out.read_text(), str(out))
    assert snap["baseline"]["ttft_p50_s"] == 2.24491 and snap["current"]["ttft_p50_s"] == 6.68077
    assert "offered_load_ratio" not in snap["current"]               # neither run printed its load settings
    result = CliRunner().invoke(cli, ["diagnose", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"ttft_p50_up"' in result.output and '"itl_p50_up"' in result.output
    report = json.loads(result.output)        # the README's example: five times the prompts sent at once
    assert report["hypotheses"][0]["id"] == "load_surge"
    assert report["next_probes"][0]["id"] == "serving_load"


def test_load_settings_of_both_runs_give_the_offered_load_ratio(tmp_path):
    """The arithmetic only: these two real runs are unrelated (concurrency 30 and 8)."""
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--artifact", str(BENCH / "vllm_unknown_concurrency30_slow_ttft.txt"),
                                      "--baseline-artifact", str(BENCH / "vllm_unknown_tp2_base_failed_peak_annotated.txt"),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    snap = load_text(out.read_text(), str(out))
    assert snap["current"]["offered_load_ratio"] == pytest.approx(30 / 8)
    assert snap["context"]["client_concurrency"] == 30               # the slow run's setting
