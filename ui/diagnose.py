"""Diagnose page: headline symptom, then the most informative question first; the ranking updates after each answer."""
import copy
import os
from pathlib import Path

import streamlit as st

from perfdoctor import report
from perfdoctor.errors import InputError
from perfdoctor.ui.common import get_engine, show_diagnosis
from perfdoctor.ui.i18n import kb_text, t
from perfdoctor.ui.logic import (HEADLINES, answers_from_text, answers_with_artifact, answers_yaml, distinguishes,
                                 empty_answers, needs_baseline, parse_value, to_snapshot)

NONE = "__none__"


def render(lang: str):
    engine = get_engine()
    kb, ss = engine.kb, st.session_state
    ss.setdefault("answers", empty_answers())
    ss.setdefault("skipped", set())
    if "preloaded" not in ss:
        ss.preloaded = True
        path = os.environ.get("PERFDOCTOR_SNAPSHOT")
        if path:
            _load(kb, Path(path).read_text(encoding="utf-8"), path)

    st.title(t("diagnose_title", lang))
    ss.setdefault("headline", "h_throughput")
    ss.headline = headline = st.radio(t("headline", lang), list(HEADLINES), index=list(HEADLINES).index(ss.headline),
                                      format_func=lambda k: t(k, lang), key=f"headline:{lang}", horizontal=True)
    if not ss.answers["current"] and ss.answers["changes"] is None:
        ss.answers["context"] = empty_answers(headline)["context"]
    _snapshot_controls(kb, lang)

    snap = to_snapshot(kb, ss.answers)
    d = engine.diagnose(snap, asked=set(ss.skipped))
    if snap.current:
        ss.snapshot_yaml = answers_yaml(ss.answers)
        ss.report_md = report.to_markdown(d, kb)
        st.sidebar.download_button(t("save", lang), ss.snapshot_yaml, "snapshot.yaml", "application/x-yaml", key="save")
        st.sidebar.download_button(t("report", lang), ss.report_md, "perfdoctor-report.md", "text/markdown", key="report")

    left, right = st.columns(2)
    with left:
        _question(kb, d, HEADLINES[headline][0], lang)
    with right:
        show_diagnosis(d, kb, lang, evidence=bool(d.observations))


def _load(kb, text, where):
    try:
        st.session_state.answers = answers_from_text(kb, text, where)
        st.session_state.skipped = set()
        return True
    except InputError as exc:
        st.error(str(exc))
        return False


def _snapshot_controls(kb, lang):
    ss = st.session_state
    st.sidebar.subheader(t("snapshot", lang))
    up = st.sidebar.file_uploader(t("load", lang), type=["yaml", "yml", "json"], key="upload")
    if up is not None and ss.get("loaded_id") != up.file_id:
        ss.loaded_id = up.file_id
        if _load(kb, up.getvalue().decode("utf-8"), up.name):
            st.sidebar.success(t("loaded", lang, name=up.name))
    st.sidebar.subheader(t("tool_output", lang))
    part = st.sidebar.radio(t("tool_state", lang), ["current", "baseline"], key="artifact_part",
                            format_func=lambda p: t(f"tool_{p}", lang))
    out = st.sidebar.file_uploader(t("tool_load", lang), key="artifact_upload", help=t("tool_help", lang))
    if out is not None and ss.get("artifact_id") != out.file_id:
        ss.artifact_id = out.file_id
        try:
            ss.answers, kind, notes = answers_with_artifact(kb, ss.answers, out.getvalue(), out.name, part)
            ss.artifact_msg = (t("tool_read", lang, name=out.name, kind=kind, state=t(f"tool_{part}", lang)), notes)
        except InputError as exc:
            ss.artifact_msg = (None, [str(exc)])
    if ss.get("artifact_msg"):
        done, notes = ss.artifact_msg
        if done:
            st.sidebar.success(done)
            for note in notes:
                st.sidebar.caption(note)
        else:
            st.sidebar.error(notes[0])
    if st.sidebar.button(t("reset", lang), key="reset"):
        ss.answers, ss.skipped = empty_answers(ss.get("headline")), set()


def _question(kb, d, first, lang):
    ss = st.session_state
    candidates = [p for p in d.next_probes if p.id not in ss.skipped]
    if not candidates:
        ss.question = None
        st.success(t("no_more", lang))
        return
    p = next((c for c in candidates if c.id == first), candidates[0])
    ss.question = p.id
    probe = kb.probes[p.id]
    with st.form(f"form:{p.id}"):
        st.subheader(f"{t('question', lang)}: {kb_text(probe, 'title', lang)}")
        tops = ", ".join(f"{kb_text(kb.root_causes[h.id], 'title', lang)} ({h.probability:.2f})"
                         for h in distinguishes(kb, p.id, d.hypotheses)) or "-"
        st.markdown(f"**{t('why', lang)}**: {t('gain', lang, bits=p.gain_bits, cost=p.cost)}; "
                    f"{t('distinguishes', lang)}: {tops}")
        st.markdown(f"**{t('how', lang)}**")
        st.code(p.command, language="bash", wrap_lines=True)
        if p.promql:
            st.code(p.promql, language="text", wrap_lines=True)
        if p.disruptive:
            st.warning(t("disruptive", lang))
        for sid in p.signals:
            _inputs(kb, p.id, sid, lang)
        submit = st.form_submit_button(t("submit", lang), key=f"submit:{p.id}")
        skip = st.form_submit_button(t("skip", lang), key=f"skip:{p.id}")
    if skip:
        ss.skipped.add(p.id)
        st.rerun()
    if submit:
        _submit(kb, p)
    with st.expander(t("upcoming", lang)):
        st.markdown("\n".join([f"- {kb_text(kb.probes[c.id], 'title', lang)}: {c.gain_bits:.2f} bits, {c.cost:g} min"
                               for c in candidates if c.id != p.id][:6]))


def _parts(kb, sid):
    return ("baseline", "current") if needs_baseline(kb, sid) else ("current",)


def _inputs(kb, pid, sid, lang):
    """One widget per signal and part; each one's empty / first choice means "don't know"."""
    if sid == "changes":
        st.multiselect(t("changes_label", lang), list(kb.changes), key=f"in:{pid}:changes",
                       format_func=lambda c: kb_text(kb.changes[c], "title", lang))
        return
    sig = kb.signals[sid]
    label = f"{kb_text(sig, 'title', lang)} [{sid}, {sig.unit}]"
    parts = _parts(kb, sid)
    cols = st.columns(len(parts))
    for col, part in zip(cols, parts):
        key, text = f"in:{pid}:{part}:{sid}", f"{label}: {t(part, lang)}" if len(parts) > 1 else label
        with col:
            if sig.kind == "bool":
                st.selectbox(text, [None, True, False], key=key,
                             format_func=lambda v: t("dont_know", lang) if v is None else str(v).lower())
            elif sig.kind == "list":
                st.multiselect(text, (sig.values or []) + [NONE], key=key, placeholder=t("dont_know", lang),
                               format_func=lambda v: t("none_of_these", lang) if v == NONE else v)
            elif sig.kind == "string" and sig.values:
                st.selectbox(text, [None] + sig.values, key=key,
                             format_func=lambda v: t("dont_know", lang) if v is None else v)
            elif sig.kind == "string":
                st.text_input(text, key=key, placeholder=t("dont_know", lang))
            else:
                st.text_input(text, key=key, placeholder=t("dont_know", lang), help=t("value_help", lang))


def _read(kb, pid, sid, part):
    raw = st.session_state.get(f"in:{pid}:{part}:{sid}")
    kind = kb.signals[sid].kind
    if kind == "list":
        return None if not raw else [v for v in raw if v != NONE]
    if kind in ("bool",) or (kind == "string" and kb.signals[sid].values):
        return raw
    if kind == "string":
        return raw.strip() or None if raw else None
    return parse_value(raw)


def _submit(kb, p):
    ss = st.session_state
    new, unknown = copy.deepcopy(ss.answers), False
    try:
        for sid in p.signals:
            if sid == "changes":
                new["changes"] = list(ss.get(f"in:{p.id}:changes") or [])
                continue
            for part in _parts(kb, sid):
                value = _read(kb, p.id, sid, part)
                if value is None:
                    unknown = unknown or part == "current"
                else:
                    new[part][sid] = value
        to_snapshot(kb, new)
    except InputError as exc:
        st.error(str(exc))
        return
    if unknown:
        ss.skipped.add(p.id)
    ss.answers = new
    st.rerun()
