"""Shared by the pages: the cached Engine and the rendering of a Diagnosis."""
import altair as alt
import pandas as pd
import streamlit as st

from perfdoctor.engine.rank import Engine
from perfdoctor.report import confidence
from perfdoctor.ui.i18n import kb_text, t
from perfdoctor.ui.logic import chain_dot


@st.cache_resource
def get_engine() -> Engine:
    return Engine.load()


def probability_chart(d, kb, lang, top=8):
    rows = [{"cause": kb_text(kb.root_causes[h.id], "title", lang), "id": h.id, "P": round(h.probability, 4)}
            for h in d.hypotheses[:top]]
    chart = alt.Chart(pd.DataFrame(rows)).mark_bar().encode(
        x=alt.X("P:Q", scale=alt.Scale(domain=[0, 1])), y=alt.Y("cause:N", sort="-x", title=None, axis=alt.Axis(labelLimit=260)),
        tooltip=["id", "P"])
    st.altair_chart(chart, width="stretch")


def ranking_list(d, kb, lang, top=5):
    st.markdown("\n".join(f"{i}. **{kb_text(kb.root_causes[h.id], 'title', lang)}** (`{h.id}`) P = {h.probability:.2f}"
                          for i, h in enumerate(d.hypotheses[:top], 1)))


def hypothesis_detail(h, kb, lang):
    rc = kb.root_causes[h.id]
    st.markdown(f"**{kb_text(rc, 'title', lang)}** (`{h.id}`), P = {h.probability:.2f}. "
                f"{t('bottleneck', lang)}: {', '.join(h.bottlenecks)}; {t('layer', lang)}: {h.layer}")
    st.caption(kb_text(rc, "description", lang))
    if h.chain:
        st.markdown(f"**{t('chain', lang)}**")
        st.graphviz_chart(chain_dot(h))
    cols = st.columns(2)
    for col, side, key in ((cols[0], "for", "ev_for"), (cols[1], "against", "ev_against")):
        with col:
            st.markdown(f"**{t(key, lang)}**")
            rows = h.evidence[side]
            if rows:
                st.dataframe(pd.DataFrame([{"finding": e["finding"], "observed": e["observed"], "shift": e["shift"]}
                                           for e in rows]), hide_index=True, width="stretch")
            else:
                st.caption("—")
    st.markdown(f"**{t('where', lang)}**: {h.localization['text']}")
    st.markdown(f"**{t('remedies', lang)}**")
    for r in h.remedies:
        tech = kb.technologies[r["id"]]
        st.markdown(f"- **{kb_text(tech, 'title', lang)}** ({r['kind']}). {t('risk', lang)}: "
                    f"{kb_text(tech, 'counterexample', lang)}  \n  {t('cannot_fix', lang)}: "
                    f"{'; '.join(kb_text(tech, 'cannot_fix', lang))}  \n  {t('retest', lang)}: {', '.join(r['retest'])}")


def ceiling_chart(d, lang):
    """Observed as a share of each hardware ceiling (1 = at the limit), with the formula on hover."""
    rows = [{"ceiling": c.title, "share": round(c.fraction_of_ceiling, 3), "formula": c.formula}
            for c in d.ceilings if c.fraction_of_ceiling is not None]
    if not rows:
        return
    st.subheader(t("ceilings", lang))
    chart = alt.Chart(pd.DataFrame(rows)).mark_bar().encode(
        x=alt.X("share:Q", scale=alt.Scale(domain=[0, 1.1]), title=t("share_of_ceiling", lang)),
        y=alt.Y("ceiling:N", title=None, axis=alt.Axis(labelLimit=320)), tooltip=["ceiling", "share", "formula"])
    st.altair_chart(chart, width="stretch")


def show_diagnosis(d, kb, lang, evidence=True):
    """Ranking chart and list, then the leading hypothesis in full and the next two folded."""
    for w in d.warnings:
        st.warning(w)
    st.subheader(t("ranking", lang))
    if not evidence:
        st.info(t("no_evidence", lang))
    elif kind := confidence(d):
        hs = d.hypotheses
        st.warning(t(f"conf_{kind}", lang, p=hs[0].probability, p2=hs[1].probability if len(hs) > 1 else 0.0,
                     a=kb_text(kb.root_causes[hs[0].id], "title", lang),
                     b=kb_text(kb.root_causes[hs[1].id], "title", lang) if len(hs) > 1 else ""))
    probability_chart(d, kb, lang)
    ranking_list(d, kb, lang)
    ceiling_chart(d, lang)
    if not evidence or not d.hypotheses:
        return
    st.subheader(t("leading", lang))
    hypothesis_detail(d.hypotheses[0], kb, lang)
    for h in d.hypotheses[1:3]:
        with st.expander(f"{kb_text(kb.root_causes[h.id], 'title', lang)} (P = {h.probability:.2f})"):
            hypothesis_detail(h, kb, lang)
