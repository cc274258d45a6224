"""Live page: a snapshot read from Prometheus, ranked automatically, with per-GPU / per-rank views."""
import importlib
import inspect
import time

import altair as alt
import pandas as pd
import streamlit as st

from perfdoctor.errors import InputError
from perfdoctor.ui.common import get_engine, show_diagnosis
from perfdoctor.ui.i18n import kb_text, t
from perfdoctor.ui.logic import mean_value, outlier_entities

READER = "perfdoctor.symptoms.prometheus"


def _reader():
    try:
        return importlib.import_module(READER)
    except ModuleNotFoundError as exc:
        if exc.name not in (READER, "perfdoctor.symptoms"):
            raise
        return None


def render(lang: str):
    st.title(t("live_title", lang))
    prom = _reader()
    if prom is None:
        st.info(t("no_reader", lang))
        return
    for key, default in (("prom_url", "http://127.0.0.1:9090"), ("prom_window", "10m"), ("prom_offset", "1h")):
        st.session_state.setdefault(key, default)
    c1, c2, c3 = st.columns([3, 1, 1])
    url = c1.text_input(t("prom_url", lang), key="prom_url")
    window = c2.text_input(t("window", lang), key="prom_window")
    offset = c3.text_input(t("offset", lang), key="prom_offset")
    selector = st.text_input(t("selector", lang), key="prom_selector")
    token = st.text_input(t("token", lang), type="password", key="prom_token")
    c4, c5 = st.columns(2)
    if c4.button(t("refresh", lang), key="prom_refresh"):
        st.session_state.live_on = True
    auto = c5.checkbox(t("auto", lang), key="prom_auto")
    if not (st.session_state.get("live_on") or auto):
        return

    @st.fragment(run_every=60 if auto else None)
    def live():
        _query_and_show(prom, lang, url, window, offset, selector, token)

    live()


def _query_and_show(prom, lang, url, window, offset, selector, token):
    engine, ss = get_engine(), st.session_state
    kb = engine.kb
    kwargs = {"window": window, "baseline_offset": offset, "selector": selector}
    if token:
        if "token" in inspect.signature(prom.build_snapshot).parameters:
            kwargs["token"] = token
        else:
            st.warning(t("no_token_support", lang))
    try:
        with st.spinner(t("querying", lang)):
            snap = prom.build_snapshot(kb, url, **kwargs)
            d = engine.diagnose(snap)
        ss.live_last = (time.strftime("%H:%M:%S"), d)
    except (InputError, OSError) as exc:
        st.error(str(exc))
        if "live_last" not in ss:
            st.info(t("nothing_yet", lang))
            return
        at, d = ss.live_last
        st.info(t("last_good", lang, at=at))
    show_diagnosis(d, kb, lang, evidence=bool(d.observations))
    _per_entity(d, kb, lang)
    _baseline_vs_now(d, kb, lang)


def _per_entity(d, kb, lang):
    series = {sid: v for sid, v in d.snapshot.current.items()
              if isinstance(v, dict) and all(mean_value(x) is not None for x in v.values())}
    if not series:
        return
    st.subheader(t("per_entity", lang))
    cols = st.columns(2)
    for n, (sid, values) in enumerate(sorted(series.items())):
        flagged = outlier_entities(d, sid)
        df = pd.DataFrame([{"entity": e, "value": float(v), "outlier": e in flagged} for e, v in values.items()])
        chart = alt.Chart(df, title=kb_text(kb.signals[sid], "title", lang) + f" ({kb.signals[sid].unit})").mark_bar() \
            .encode(x=alt.X("entity:N", sort=None, title=None), y="value:Q",
                    color=alt.Color("outlier:N", scale=alt.Scale(domain=[False, True], range=["#4c78a8", "#e45756"])),
                    tooltip=["entity", "value", "outlier"])
        with cols[n % 2]:
            st.altair_chart(chart, width="stretch")


def _baseline_vs_now(d, kb, lang):
    snap = d.snapshot
    rows = []
    for sid in sorted(set(snap.baseline) & set(snap.current)):
        base, now = mean_value(snap.baseline[sid]), mean_value(snap.current[sid])
        if base is None or now is None:
            continue
        rows.append({"signal": sid, "title": kb_text(kb.signals[sid], "title", lang), "unit": kb.signals[sid].unit,
                     t("baseline", lang): base, t("current", lang): now, "x": round(now / base, 2) if base else None})
    if rows:
        st.subheader(t("base_vs_now", lang))
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
