"""The CLI in-process: output formats, exit codes, and one-line errors."""
import json

import pytest
from click.testing import CliRunner

from conftest import REPO
from perfdoctor.cli import cli

EXAMPLE = str(REPO / "examples" / "code_completion_13b.yaml")


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_diagnose_json_contract():
    r = run("diagnose", EXAMPLE, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    probs = [h["probability"] for h in out["hypotheses"]]
    assert probs == sorted(probs, reverse=True) and len(probs) == 30
    top = out["hypotheses"][0]
    assert top["id"] == "prompt_length_growth"
    assert set(top) >= {"id", "probability", "bottlenecks", "chain", "evidence", "localization", "remedies"}
    assert {"id", "signals", "command", "cost"} <= set(out["next_probes"][0])
    assert isinstance(out["warnings"], list)


def test_diagnose_text_and_markdown():
    text = run("diagnose", EXAMPLE).output
    assert text.splitlines()[1].startswith("1. prompt_length_growth")
    assert "chain: prompt_length_growth -> heavier prefill" in text
    md = run("diagnose", EXAMPLE, "--format", "markdown").output
    for part in ("## Setting", "Workload: inference", "4 nodes x 8 A100-80GB", "vllm 0.6.3", "## Metric definitions",
                 "`e2e_p99_s` (s)", "## Causal hypotheses", "how it can fail (counterexample)", "P50/P95/P99"):
        assert part in md


def test_a_weak_leader_is_called_a_shortlist_not_a_verdict(tmp_path):
    """P99 TTFT doubled and nothing else known: the ranking is a guess, and every format says so."""
    thin = tmp_path / "thin.yaml"
    thin.write_text("context: {workload: inference}\nbaseline: {ttft_p99_s: 1.0}\ncurrent: {ttft_p99_s: 2.0}\n")
    text = run("diagnose", str(thin)).output
    assert text.splitlines()[1].startswith("Low confidence: the leading cause has P=0.")
    assert "> Low confidence" in run("diagnose", str(thin), "--format", "markdown").output
    assert json.loads(run("diagnose", str(thin), "--format", "json").output)["confidence"].startswith("Low confidence")
    assert json.loads(run("diagnose", EXAMPLE, "--format", "json").output)["confidence"] is None   # P 0.99


def test_probe_command_asks_only_for_missing_signals():
    import yaml
    r = run("probe", EXAMPLE, "--format", "json")
    assert r.exit_code == 0
    probes = json.loads(r.output)["next_probes"]
    snapshot = yaml.safe_load(open(EXAMPLE))
    known = set(snapshot["current"]) | set(snapshot.get("baseline", {}))
    assert probes and all(p["signals"] and not set(p["signals"]) & known for p in probes)


def test_tech_table_and_detail():
    table = run("tech").output
    assert "paged_attention" in table and "relieves" in table.splitlines()[0]
    detail = run("tech", "paged_attention").output
    assert "cannot fix:" in detail and "counterexample:" in detail
    r = run("tech", "warp_drive")
    assert r.exit_code == 2 and "unknown technology or action" in r.output


def test_kb_check_and_graph():
    r = run("kb", "check")
    assert r.exit_code == 0 and "0 errors" in r.output
    dot = run("kb", "graph").output
    assert dot.startswith("digraph perfdoctor {") and '"root_cause:load_surge" -> "mechanism:queue_buildup"' in dot


@pytest.mark.parametrize("content, fragment", [
    ("current: {kv_cache_usage: 3.5e3}", "current.kv_cache_usage: 3500 is outside the valid range"),
    ("current: {e2e_p99_s: 1, e2e_p99_s: 2}", "line 1: duplicate key 'e2e_p99_s'"),
])
def test_bad_input_exit_2_with_one_line(tmp_path, content, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    r = CliRunner().invoke(cli, ["diagnose", str(path)])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"perfdoctor: error: {path}: ") and fragment in lines[0]


def test_missing_file_exit_2():
    r = run("diagnose", "does/not/exist.yaml")
    assert r.exit_code == 2 and "does/not/exist.yaml: file not found" in r.output


def test_warnings_are_shown(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("current: {sm_active: 45, dram_active: 0.9, made_up: 1}")
    out = json.loads(run("diagnose", str(path), "--format", "json").output)
    assert any("looks like a percent" in w for w in out["warnings"])
    assert any("made_up: unknown signal" in w for w in out["warnings"])


def test_cli_argument_errors_are_clean(tmp_path):
    r = run("snapshot", "--from", EXAMPLE, "-o", str(tmp_path / "missing" / "x.yaml"))
    assert r.exit_code == 2 and "cannot write" in r.output
    r = run("diagnose", "--prometheus", "http://127.0.0.1:9", "--baseline-offset", "1hour")
    assert r.exit_code == 2 and "--baseline-offset: 1hour: expected a Prometheus duration" in r.output
    assert run("diagnose", EXAMPLE, "--top", "-1").exit_code == 2


def test_markdown_with_a_model_name(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("context: {model: llama-3-70b}\ncurrent: {gpu_util: 0.5}\n")
    r = run("diagnose", str(path), "--format", "markdown")
    assert r.exit_code == 0 and "model: llama-3-70b" in r.output


def test_text_report_marks_absent_evidence():
    """GPU util 30-35% counts for a cause because it is not high; the text must say 'no gpu_util_high'."""
    case = str(REPO / "cases" / "556_dynamo_disagg_cuda_ipc_disabled_ttft.yaml")
    r = run("diagnose", case, "--format", "json")
    items = [(e["finding"], e["present"]) for h in json.loads(r.output)["hypotheses"]
             for e in h["evidence"]["for"] + h["evidence"]["against"]]
    assert ("gpu_util_high", False) in items
    text = run("diagnose", case).output
    assert "no gpu_util_high (" in text
    assert " gpu_util_high (" not in text.replace("no gpu_util_high (", "")
