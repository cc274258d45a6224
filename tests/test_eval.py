"""`perfdoctor eval`: metrics on a labeled library, probe counts against the checklist, and the CLI gate."""
import shutil

import pytest
from click.testing import CliRunner

from conftest import REPO
from perfdoctor.cli import cli
from perfdoctor.engine.evaluation import calibration, evaluate_library, per_root_cause, probes_to_diagnosis, summary


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("cases")
    (root / "holdout").mkdir()
    for name in ("worked_example_13b_code_completion", "single_slow_gpu_of_32", "load_surge_partner_launch"):
        shutil.copy(REPO / "tests" / "scenarios" / f"{name}.yaml", root / f"{name}.yaml")
    shutil.copy(REPO / "tests" / "scenarios" / "p99_only_regression.yaml", root / "holdout" / "p99.yaml")
    return root


def test_metrics_and_split(engine, library):
    report = evaluate_library(engine, library)
    whole, held = summary(report), summary(report, holdout=True)
    assert whole["cases"] == 4 and held["cases"] == 1
    assert whole["ac_at_1"] == 1.0 and whole["ac_at_3"] == 1.0
    assert 0 <= whole["brier_top"] < 0.1
    assert per_root_cause(report)["gpu_throttling"] == {"cases": 1, "ac_at_1": 1, "ac_at_3": 1}
    bands = calibration(report)
    assert sum(b["cases"] for b in bands) == 4 and all(b["right"] == 1.0 for b in bands)
    for b in bands:
        assert b["band"][0] <= b["mean_probability"] <= b["band"][1]
    assert sum(b["cases"] for b in calibration(report, holdout=True)) == 1


def test_worker_processes_give_the_same_report(engine, library):
    """Scoring in two worker processes returns the same results, in the same order, as scoring in this one."""
    alone, pooled = evaluate_library(engine, library), evaluate_library(engine, library, jobs=2)
    assert [r.id for r in pooled.results] == [r.id for r in alone.results]
    for a, b in zip(alone.results, pooled.results):   # BLAS may sum in another order: probabilities to 1e-9
        assert b.top_probability == pytest.approx(a.top_probability, abs=1e-9)
        assert (b.rank, b.top, b.probes, b.probes_solved, b.checklist_probes) == \
            (a.rank, a.top, a.probes, a.probes_solved, a.checklist_probes)


def test_probe_loop_reaches_diagnosis_from_the_headline(engine):
    """From P99 and throughput alone, perfdoctor's own probe order reaches prompt growth, in fewer steps."""
    path = REPO / "tests" / "scenarios" / "worked_example_13b_code_completion.yaml"
    from perfdoctor.yamlio import load_file
    from perfdoctor.symptoms.snapshot import parse_snapshot
    case = load_file(path)
    full = parse_snapshot(case["snapshot"], engine.kb, str(path))
    ours, solved = probes_to_diagnosis(engine, full, case["initial"], {"prompt_length_growth"}, None)
    checklist = load_file(engine.kb.root / "checklist.yaml")["order"]
    theirs, _ = probes_to_diagnosis(engine, full, case["initial"], {"prompt_length_growth"}, checklist)
    assert solved and 1 <= ours <= 4
    assert theirs >= ours


def test_cli_eval_gate(library):
    ok = CliRunner().invoke(cli, ["eval", str(library), "--no-probes", "--min-ac3", "0.9"])
    assert ok.exit_code == 0, ok.output
    assert "all cases: 4 cases  AC@1 1.000" in ok.output and "holdout: 1 cases" in ok.output


def test_cli_eval_gate_fails_below_threshold(tmp_path):
    case = (REPO / "tests" / "scenarios" / "load_surge_partner_launch.yaml").read_text()
    (tmp_path / "wrong.yaml").write_text(case.replace("root_cause: load_surge", "root_cause: nvlink_degradation"))
    r = CliRunner().invoke(cli, ["eval", str(tmp_path), "--no-probes", "--min-ac3", "0.9"])
    assert r.exit_code == 1 and "below the required 0.9" in r.output


def test_cli_eval_bad_case(tmp_path):
    (tmp_path / "bad.yaml").write_text("id: x\nexpected: {root_cause: warp_core}\nsnapshot: {current: {e2e_p99_s: 1}}\n")
    r = CliRunner().invoke(cli, ["eval", str(tmp_path)])
    assert r.exit_code == 2 and "expected.root_cause: unknown root cause 'warp_core'" in r.output


def test_before_fixes_drops_only_the_test_outcomes(engine, tmp_path):
    """A real case whose reporter bisected and rolled back: without the rollback's outcome it is less certain."""
    shutil.copy(REPO / "cases" / "1840_llamacpp_b1843_split_mode_default.yaml", tmp_path / "case.yaml")
    from perfdoctor.engine.evaluation import without_test_outcomes
    from perfdoctor.symptoms.snapshot import parse_snapshot
    from perfdoctor.yamlio import load_file
    case = load_file(tmp_path / "case.yaml")
    snap = parse_snapshot(case["snapshot"], engine.kb, "case.yaml")
    before = without_test_outcomes(engine, snap)
    assert "rollback_restores" in snap.current and "rollback_restores" not in before.current
    assert set(snap.current) - set(before.current) == {"rollback_restores"}
    assert before.changes == snap.changes and before.baseline == snap.baseline
    full = evaluate_library(engine, tmp_path, probes=False).results[0]
    early = evaluate_library(engine, tmp_path, probes=False, before_fixes=True).results[0]
    assert full.top == "software_version_regression"
    assert early.top_probability < full.top_probability
