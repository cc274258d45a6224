"""The Streamlit pages, driven by streamlit.testing.v1.AppTest: questionnaire, snapshots, report, language, KB, live."""
import subprocess
import sys
import types

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from conftest import REPO  # noqa: E402
from perfdoctor.errors import InputError  # noqa: E402
from perfdoctor.symptoms.snapshot import parse_snapshot  # noqa: E402
from perfdoctor.ui.logic import chain_dot, parse_value  # noqa: E402
from perfdoctor.yamlio import load_file  # noqa: E402

APP = str(REPO / "ui" / "app.py")
NONE = "__none__"


def app(**state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def no_exception(at):
    assert not at.exception, [e.value for e in at.exception]


def ranking(at) -> list[str]:
    """Root-cause ids in the order the ranking list shows them."""
    text = next(m.value for m in at.markdown if m.value.startswith("1. **"))
    return [line.split("(`")[1].split("`)")[0] for line in text.splitlines()]


def chart_frames(at):
    """The data behind every Vega-Lite chart on the page."""
    import pyarrow as pa
    return [pa.ipc.open_stream(ds.data.data).read_all().to_pandas()
            for c in at.get("vega_lite_chart") for ds in c.proto.datasets]


def as_text(v) -> str:
    return ", ".join(f"{k}: {x}" for k, x in v.items()) if isinstance(v, dict) else str(v)


def as_list(v):
    if isinstance(v, dict):
        return sorted({x for xs in v.values() for x in xs}) or [NONE]
    return list(v) or [NONE]


def answer(at, values: dict, changes=None):
    """Answer the question on screen from values {'baseline': {...}, 'current': {...}}; blanks mean don't know."""
    q = at.session_state["question"]
    prefix = f"in:{q}:"
    for w in at.text_input:
        if w.key and w.key.startswith(prefix):
            _, _, part, sid = w.key.split(":")
            if sid in values[part]:
                w.input(as_text(values[part][sid]))
    for w in at.selectbox:
        if w.key and w.key.startswith(prefix):
            _, _, part, sid = w.key.split(":")
            if sid in values[part]:
                w.set_value(values[part][sid])
    for w in at.multiselect:
        if w.key == f"in:{q}:changes":
            w.set_value(changes or [])
        elif w.key and w.key.startswith(prefix):
            _, _, part, sid = w.key.split(":")
            if sid in values[part]:
                w.set_value(as_list(values[part][sid]))
    at.button(key=f"submit:{q}").click().run()
    no_exception(at)
    return q


def answer_all(at, values, changes=None, max_steps=40):
    asked = []
    while at.session_state["question"] and len(asked) < max_steps:
        q = answer(at, values, changes)
        assert q not in asked, f"{q} asked twice"
        asked.append(q)
    return asked


def test_worked_example_by_questions_reaches_prompt_length_growth():
    ex = load_file(REPO / "examples" / "code_completion_13b.yaml")
    at = app()
    no_exception(at)
    at.radio(key="headline:en").set_value("h_ttft").run()
    assert at.session_state["question"] == "serving_latency_breakdown", "TTFT starts from the latency breakdown"
    prior = ranking(at)
    answer(at, ex)
    after_one = ranking(at)
    assert after_one != prior, "an answer must change the ranking"
    asked = answer_all(at, ex, ex["changes"])
    assert "ask_changes" in asked and "serving_load" in asked
    assert ranking(at)[0] == "prompt_length_growth"
    assert at.session_state["answers"]["changes"] == ["prompt_template"]


def test_training_scenario_by_questions_reaches_gpu_throttling():
    case = load_file(REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml")
    values = case["snapshot"]
    at = app()
    at.radio(key="headline:en").set_value("h_step").run()
    assert at.session_state["question"] == "training_step_profile"
    assert at.session_state["answers"]["context"] == {"workload": "training"}
    answer_all(at, values)
    assert ranking(at)[0] == "gpu_throttling"
    assert any("node2/gpu5" in m.value for m in at.markdown), "the slow GPU is named"


def test_dont_know_is_not_asked_again():
    at = app()
    first = at.session_state["question"]
    at.button(key=f"skip:{first}").click().run()
    no_exception(at)
    assert first in at.session_state["skipped"]
    assert at.session_state["question"] != first
    if at.session_state["question"] == "ask_changes":   # a blank change list means "nothing changed": an answer
        at.button(key="skip:ask_changes").click().run()
    second = answer(at, {"baseline": {}, "current": {}})   # submitted with every field blank = don't know
    assert second != "ask_changes" and second in at.session_state["skipped"]
    assert at.session_state["question"] not in (first, second)


def test_bad_answer_shows_an_error_and_keeps_the_question():
    at = app()
    at.radio(key="headline:en").set_value("h_ttft").run()
    at.text_input(key="in:serving_latency_breakdown:current:ttft_p99_s").input("-3")
    at.button(key="submit:serving_latency_breakdown").click().run()
    assert at.error and "outside the valid range" in at.error[0].value
    assert at.session_state["question"] == "serving_latency_breakdown"


def test_snapshot_save_and_reload_gives_the_same_ranking(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(REPO / "examples" / "code_completion_13b.yaml"))
    at = app()
    no_exception(at)
    first = ranking(at)
    assert first[0] == "prompt_length_growth"
    assert at.sidebar.get("download_button"), "save and report buttons in the sidebar"
    saved = tmp_path / "saved.yaml"
    saved.write_text(at.session_state["snapshot_yaml"], encoding="utf-8")
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(saved))
    again = app()
    assert ranking(again) == first
    monkeypatch.delenv("PERFDOCTOR_SNAPSHOT")
    uploaded = app()
    uploaded.file_uploader(key="upload").upload("saved.yaml", saved.read_bytes(), "application/x-yaml")
    uploaded.run()
    no_exception(uploaded)
    assert ranking(uploaded) == first


def test_report_download_has_markdown(monkeypatch):
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(REPO / "examples" / "code_completion_13b.yaml"))
    at = app()
    labels = [b.proto.label for b in at.sidebar.get("download_button")]
    assert "Download Markdown report" in labels and "Save answers as snapshot (YAML)" in labels
    md = at.session_state["report_md"]
    assert md.startswith("# Performance incident: Prompt-length growth")
    assert "## Causal hypotheses" in md


def test_language_switch_changes_the_text():
    at = app()
    assert at.title[0].value == "Diagnose a slowdown"
    at.sidebar.radio(key="lang").set_value("zh").run()
    no_exception(at)
    assert at.title[0].value == "诊断性能下降"
    assert any(s.value.startswith("排序") for s in at.subheader)


def test_page_and_language_switch_keep_headline_and_answers():
    ex = load_file(REPO / "examples" / "code_completion_13b.yaml")
    at = app()
    at.radio(key="headline:en").set_value("h_ttft").run()
    answer(at, ex)
    at.sidebar.radio(key="page:en").set_value("knowledge").run()
    at.sidebar.radio(key="lang").set_value("zh").run()
    at.sidebar.radio(key="page:zh").set_value("diagnose").run()
    no_exception(at)
    assert at.radio(key="headline:zh").value == "h_ttft"
    assert at.session_state["answers"]["current"]["ttft_p99_s"] == 1.6
    assert at.session_state["question"] == "serving_load"


def test_knowledge_page_filters_and_draws_the_graph():
    at = app(page="knowledge")
    no_exception(at)
    full = at.dataframe[0].value
    at.selectbox(key="kb_layer").set_value("inference_engine").run()
    filtered = at.dataframe[0].value
    assert 0 < len(filtered) < len(full) and set(filtered["layer"]) == {"inference_engine"}
    at.selectbox(key="kb_bottleneck").set_value("vram").run()
    assert all("vram" in r or "vram" in w for r, w in zip(at.dataframe[0].value["relieves"], at.dataframe[0].value["can_worsen"]))
    causes = at.dataframe[1].value.set_index("id")
    assert "nvidia_smi_query" in causes.loc["gpu_throttling", "probes"]
    gpus, models = at.dataframe[2].value.set_index("id"), at.dataframe[3].value.set_index("id")
    assert gpus.loc["h100_sxm", "HBM TB/s"] == 3.35
    assert models.loc["qwen3_30b_a3b", "params B"] == 30.53 and models.loc["qwen3_30b_a3b", "active B"] == 3.35
    assert "llama3.1:8b" in models.loc["llama_3_8b", "names"]
    whole = at.get("graphviz_chart")[0].proto.spec
    at.selectbox(key="kb_focus").set_value("gpu_throttling").run()
    part = at.get("graphviz_chart")[0].proto.spec
    assert "root_cause:gpu_throttling" in part and "root_cause:load_surge" not in part and len(part) < len(whole)


def test_knowledge_page_in_chinese_shows_zh_kb_text():
    at = app(page="knowledge", lang="zh")
    titles = set(at.dataframe[0].value["title"])
    assert "分块预填充" in titles


def _fake_reader(snapshot_fn):
    mod = types.ModuleType("perfdoctor.symptoms.prometheus")
    mod.calls = []

    def build_snapshot(kb, url, window="10m", baseline_offset="1h", selector="", timeout=10.0):
        mod.calls.append((url, window, baseline_offset, selector))
        return snapshot_fn(kb)
    mod.build_snapshot = build_snapshot
    return mod


def test_live_page_without_reader(monkeypatch):
    monkeypatch.setitem(sys.modules, "perfdoctor.symptoms.prometheus", None)   # import fails like a missing module
    at = app(page="live")
    no_exception(at)
    assert any("Prometheus reader not installed" in i.value for i in at.info)


def test_live_page_ranks_and_highlights_outliers(monkeypatch):
    case = load_file(REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml")

    def snap(kb):
        s = parse_snapshot(case["snapshot"], kb, "prometheus")
        s.warnings.append("prometheus: no series for ib_xmit_wait_rate")
        return s
    fake = _fake_reader(snap)
    monkeypatch.setitem(sys.modules, "perfdoctor.symptoms.prometheus", fake)
    at = app(page="live")
    at.text_input(key="prom_token").input("s3cret-token").run()
    at.button(key="prom_refresh").click().run()
    no_exception(at)
    assert fake.calls == [("http://127.0.0.1:9090", "10m", "1h", "")]
    assert ranking(at)[0] == "gpu_throttling"
    assert any("ib_xmit_wait_rate" in w.value for w in at.warning)
    assert any("does not take a token" in w.value for w in at.warning)
    frames = chart_frames(at)
    flagged = [set(df[df["outlier"]]["entity"]) for df in frames if "outlier" in df]
    assert len(flagged) >= 4, "one chart per per-entity signal"
    assert {"node2/gpu5"} in flagged, "the throttled GPU is highlighted"
    assert not any("s3cret-token" in str(e.value) for els in (at.markdown, at.warning, at.info, at.error, at.code) for e in els)


def test_live_page_error_keeps_last_ranking(monkeypatch):
    case = load_file(REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml")
    state = {"fail": False}

    def snap(kb):
        if state["fail"]:
            raise InputError("prometheus", "http://127.0.0.1:9090", "connection refused")
        return parse_snapshot(case["snapshot"], kb, "prometheus")
    monkeypatch.setitem(sys.modules, "perfdoctor.symptoms.prometheus", _fake_reader(snap))
    at = app(page="live")
    at.button(key="prom_refresh").click().run()
    state["fail"] = True
    at.button(key="prom_refresh").click().run()
    no_exception(at)
    assert "connection refused" in at.error[0].value
    assert ranking(at)[0] == "gpu_throttling"


def test_parse_value_and_chain_dot(engine):
    assert parse_value("") is None and parse_value("1.5") == 1.5
    assert parse_value("gpu0: 1980, gpu1: 1095") == {"gpu0": 1980, "gpu1": 1095}
    d = engine.diagnose(parse_snapshot(load_file(REPO / "examples" / "code_completion_13b.yaml"), engine.kb))
    dot = chain_dot(d.hypotheses[0])
    assert dot.startswith("digraph") and '"prompt_length_growth" -> "m:prefill_load"' in dot


def test_ui_never_imports_pgmpy():
    code = ("import sys; from streamlit.testing.v1 import AppTest; "
            f"at = AppTest.from_file({APP!r}, default_timeout=60).run(); "
            "assert not at.exception; print('pgmpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("False")


def test_live_page_passes_the_token_only_to_a_reader_that_takes_one(monkeypatch):
    case = load_file(REPO / "tests" / "scenarios" / "single_slow_gpu_of_32.yaml")
    mod, seen = types.ModuleType("perfdoctor.symptoms.prometheus"), []

    def build_snapshot(kb, url, window="10m", baseline_offset="1h", selector="", timeout=10.0, token=None):
        seen.append(token)
        return parse_snapshot(case["snapshot"], kb, "prometheus")
    mod.build_snapshot = build_snapshot
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    at = app(page="live")
    assert at.text_input(key="prom_token").proto.type == at.text_input(key="prom_token").proto.PASSWORD
    at.text_input(key="prom_token").input("s3cret-token")
    at.button(key="prom_refresh").click().run()
    no_exception(at)
    assert seen == ["s3cret-token"]
    assert not any("does not take a token" in w.value for w in at.warning)


def test_diagnose_page_shows_observed_vs_ceiling_bars(monkeypatch):
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(REPO / "tests" / "ceiling_cases" / "low_util_decode_70b.yaml"))
    at = app()
    no_exception(at)
    assert ranking(at)[0] == "decode_memory_bound"
    shares = {row["ceiling"]: row["share"] for f in chart_frames(at) if "share" in f for row in f.to_dict("records")}
    assert shares["Decode throughput ceiling per replica (HBM bandwidth)"] == pytest.approx(0.811, abs=0.001)


def test_chain_dot_draws_a_cause_mode(engine):
    """A moded signature hangs off its mode, not straight off the cause."""
    snap = parse_snapshot({"context": {"workload": "training", "gpu": "H100-SXM", "nodes": 1, "gpus_per_node": 8},
                           "current": {"step_time_s": 3.0, "temp_c": {f"gpu{i}": 60 for i in range(7)} | {"gpu7": 92},
                                       "sm_clock_mhz": {f"gpu{i}": 1980 for i in range(7)} | {"gpu7": 1100}},
                           "baseline": {"step_time_s": 2.0}}, engine.kb)
    d = engine.diagnose(snap, with_probes=False)
    h = next(h for h in d.hypotheses if h.id == "gpu_throttling")
    dot = chain_dot(h)
    assert '"gpu_throttling" -> "mode:gpu_throttling:the GPU runs hot"' in dot
    assert '"mode:gpu_throttling:the GPU runs hot" -> "f:temp_gpu_high"' in dot


def test_tool_outputs_uploaded_as_now_and_baseline_fill_the_answers(engine):
    """A vLLM server log from the slow state, then one from the good state: the queue that grew is evidence."""
    logs = REPO / "tests" / "fixtures" / "engine_logs"
    at = app()
    at.file_uploader(key="artifact_upload").upload(
        "slow.log", (logs / "vllm_v0_0.4.1_llama3_8b_rtx3090_pending.log").read_bytes(), "text/plain")
    at.run()
    no_exception(at)
    answers = at.session_state["answers"]
    assert answers["current"]["requests_waiting"]["engine0"] > 200 and not answers["baseline"]
    assert any("Read slow.log (engine_log) as the slow state" in s.value for s in at.sidebar.success)
    at.radio(key="artifact_part").set_value("baseline").run()
    at.file_uploader(key="artifact_upload").upload(
        "good.log", (logs / "vllm_v0_unknown_t4_mistral7b_gptq_serial.log").read_bytes(), "text/plain")
    at.run()
    no_exception(at)
    answers = at.session_state["answers"]
    assert answers["baseline"]["requests_waiting"] == {"engine0": 0.0}
    assert answers["current"]["requests_waiting"]["engine0"] > 200     # the slow state is kept
    snap = parse_snapshot({k: v for k, v in answers.items() if v is not None}, engine.kb, "answers")
    assert engine.diagnose(snap, with_probes=False).observations["waiting_up"].present


def test_tool_output_that_is_not_one_shows_the_error_and_keeps_the_answers():
    at = app()
    at.file_uploader(key="artifact_upload").upload("notes.txt", b"the GPU felt slow today\n", "text/plain")
    at.run()
    no_exception(at)
    assert any("notes.txt:1" in e.value and "not a recognised tool output" in e.value for e in at.sidebar.error)
    assert at.session_state["answers"]["current"] == {}


def test_a_weak_leader_is_flagged_in_both_languages(tmp_path, monkeypatch):
    thin = tmp_path / "thin.yaml"
    thin.write_text("context: {workload: inference}\nbaseline: {ttft_p99_s: 1.0}\ncurrent: {ttft_p99_s: 2.0}\n")
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(thin))
    at = app()
    no_exception(at)
    assert any(w.value.startswith("Low confidence: the leading cause has P = 0.") for w in at.warning)
    at.sidebar.radio(key="lang").set_value("zh").run()
    no_exception(at)
    assert any(w.value.startswith("置信度低：首要原因的 P = 0.") for w in at.warning)
    monkeypatch.setenv("PERFDOCTOR_SNAPSHOT", str(REPO / "examples" / "code_completion_13b.yaml"))
    strong = app()
    assert not any("Low confidence" in w.value or "Close call" in w.value for w in strong.warning)
