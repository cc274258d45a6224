"""The case writer's tools: the format check and the vocabulary dump."""
import subprocess
import sys

from conftest import REPO


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_check_case_passes_a_library_case_and_names_each_problem(tmp_path):
    good = REPO / "cases" / "08_vllm_ttft_grows_with_request_rate.yaml"
    bad = tmp_path / "999_bad.yaml"
    bad.write_text(good.read_text().replace("root_cause: load_surge", "root_cause: load_surges")
                   .replace("initial: [ttft_p50_s, ttft_p99_s]", "initial: [itl_p50_s]"))
    ok = run("scripts/check_case.py", str(good))
    assert ok.returncode == 0 and ok.stdout.strip().endswith(": OK")
    out = run("scripts/check_case.py", str(bad))
    assert out.returncode == 1
    assert "id '08_vllm_ttft_grows_with_request_rate' is not the file name '999_bad'" in out.stdout
    assert "unknown root cause 'load_surges'" in out.stdout
    assert "initial itl_p50_s is not in current" in out.stdout
    assert "source also used by 08_vllm_ttft_grows_with_request_rate.yaml" in out.stdout
    bad.write_text(good.read_text().replace("context: {", "context: {model_config: 'max_model_len=4096', ", 1))
    out = run("scripts/check_case.py", str(bad))
    assert "context.model_config 'max_model_len=4096' is not a file" in out.stdout


def test_case_vocab_lists_signals_and_causes_but_no_strengths():
    out = run("scripts/case_vocab.py")
    assert out.returncode == 0
    assert "- requests_waiting [requests, number, per replica]" in out.stdout
    assert "- load_surge: Load surge." in out.stdout
    assert "strength:" not in out.stdout and "prior:" not in out.stdout and "leak" not in out.stdout


def test_label_agreement_counts_the_auditor_against_label_and_acceptable_causes(tmp_path):
    """An audit that names every case's label agrees fully; one that names a wrong cause for one library case
    (not among its acceptable ones) drops the library share by one case; a case without a reading is an error."""
    import yaml
    rows, library = [], 0
    for path in sorted((REPO / "cases").rglob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        rows.append([case["id"], case["expected"]["root_cause"], "high", "-"])
        library += "holdout" not in path.parts
    audit = tmp_path / "audit.csv"
    write = lambda rs: audit.write_text("id,cause,confidence,second\n" + "".join(",".join(r) + "\n" for r in rs))  # noqa: E731
    write(rows)
    out = run("scripts/label_agreement.py", str(audit))
    assert out.returncode == 0
    assert f"library ({library} cases): auditor names the label 1.000, an acceptable cause 1.000" in out.stdout
    first = rows[0]   # a library case: cases/*.yaml sort before cases/holdout/
    case = yaml.safe_load((REPO / "cases" / f"{first[0]}.yaml").read_text())
    wrong = next(c for c in ("noisy_neighbor", "load_surge")
                 if c not in {case["expected"]["root_cause"], *(case["expected"].get("also_acceptable") or [])})
    write([[first[0], wrong, "high", "-"], *rows[1:]])
    out = run("scripts/label_agreement.py", str(audit))
    assert f"an acceptable cause {(library - 1) / library:.3f}" in out.stdout
    write(rows[1:])
    out = run("scripts/label_agreement.py", str(audit))
    assert out.returncode != 0 and f"no reading for case {rows[0][0]}" in out.stderr
