"""The Streamlit app behind `perfdoctor ui`: a language switch and three pages that only call the engine."""
import streamlit as st

from perfdoctor.ui import diagnose, knowledge, live
from perfdoctor.ui.i18n import t

PAGES = {"diagnose": diagnose.render, "live": live.render, "knowledge": knowledge.render}

st.set_page_config(page_title="perfdoctor", layout="wide")
lang = st.sidebar.radio(t("language"), ["en", "zh"], format_func={"en": "English", "zh": "中文"}.get,
                        key="lang", horizontal=True)
page = st.sidebar.radio(t("page", lang), list(PAGES), format_func=lambda k: t(k, lang), key="page")
PAGES[page](lang)
