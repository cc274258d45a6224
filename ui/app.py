"""The Streamlit app behind `perfdoctor ui`: a language switch and three pages that only call the engine."""
import streamlit as st

from perfdoctor.ui import diagnose, knowledge, live
from perfdoctor.ui.i18n import t

PAGES = {"diagnose": diagnose.render, "live": live.render, "knowledge": knowledge.render}
# widget values that survive a visit to another page (Streamlit drops the state of widgets not drawn);
# the Prometheus token is deliberately not among them
KEEP = ["prom_url", "prom_window", "prom_offset", "prom_selector", "prom_auto",
        "kb_layer", "kb_bottleneck", "kb_focus"]

st.set_page_config(page_title="perfdoctor", layout="wide")
for k in KEEP:
    if k in st.session_state:
        st.session_state[k] = st.session_state[k]
lang = st.sidebar.radio(t("language"), ["en", "zh"], format_func={"en": "English", "zh": "中文"}.get,
                        key="lang", horizontal=True)
# radios whose labels follow the language are keyed per language (the browser shows a relabelled radio
# without its selection); the choice itself lives in a plain session key, "page"
st.session_state.setdefault("page", "diagnose")
st.session_state.page = st.sidebar.radio(t("page", lang), list(PAGES), index=list(PAGES).index(st.session_state.page),
                                         format_func=lambda k: t(k, lang), key=f"page:{lang}")
page = st.session_state.page
PAGES[page](lang)
