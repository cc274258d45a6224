"""Knowledge page: the technology-to-bottleneck map, root causes with their probes, the GPU and model catalogs,
the causal graph."""
import networkx as nx
import pandas as pd
import streamlit as st

from perfdoctor.engine.ceilings import facts_from_config
from perfdoctor.engine.graph import build_graph, node, to_dot
from perfdoctor.kb.hardware_schema import load_hardware
from perfdoctor.ui.common import get_engine
from perfdoctor.ui.i18n import kb_text, t
from perfdoctor.ui.logic import probes_for_cause


def render(lang: str):
    kb = get_engine().kb
    st.title(t("kb_title", lang))

    st.subheader(t("tech_map", lang))
    layers = sorted({x.layer for x in kb.technologies.values()})
    bottlenecks = sorted({b for x in kb.technologies.values() for b in x.relieves + x.can_worsen})
    c1, c2 = st.columns(2)
    layer = c1.selectbox(t("layer", lang), [None] + layers, key="kb_layer", format_func=lambda v: v or t("all", lang))
    bn = c2.selectbox(t("bottleneck", lang), [None] + bottlenecks, key="kb_bottleneck",
                      format_func=lambda v: v or t("all", lang))
    rows = [{"id": x.id, "title": kb_text(x, "title", lang), "kind": x.kind, "layer": x.layer,
             "relieves": ", ".join(x.relieves), "can_worsen": ", ".join(x.can_worsen),
             "cannot_fix": "; ".join(kb_text(x, "cannot_fix", lang)),
             "counterexample": kb_text(x, "counterexample", lang), "retest": ", ".join(x.retest)}
            for x in sorted(kb.technologies.values(), key=lambda x: (x.layer, x.id))
            if (layer is None or x.layer == layer) and (bn is None or bn in x.relieves + x.can_worsen)]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

    st.subheader(t("causes_probes", lang))
    st.dataframe(pd.DataFrame([{"id": rc.id, "title": kb_text(rc, "title", lang), "layer": rc.layer,
                                "bottlenecks": ", ".join(rc.bottlenecks),
                                "probes": ", ".join(probes_for_cause(kb, rc.id))}
                               for rc in sorted(kb.root_causes.values(), key=lambda r: r.id)]),
                 hide_index=True, width="stretch")

    st.subheader(t("hardware", lang))
    hw = load_hardware()
    st.dataframe(pd.DataFrame([{"id": g.id, "title": g.title, "HBM GB": g.hbm_gb, "HBM TB/s": g.hbm_bw_tb_s,
                                "16-bit dense TFLOPS": g.tensor_tflops, "FP8 dense TFLOPS": g.fp8_dense_tflops,
                                "NVLink GB/s": g.nvlink_gb_s, "source": g.sources[0]} for g in hw.gpus]),
                 hide_index=True, width="stretch")
    models = []
    for m in hw.models:
        facts, _ = facts_from_config(m.config, m.id)
        models.append({"id": m.id, "title": m.title, "params B": round(facts["params_b"], 2),
                       "active B": round(facts["active_params_b"], 2) if "active_params_b" in facts else None,
                       "layers": facts.get("layers"), "kv heads": facts.get("kv_heads"),
                       "names": ", ".join(m.names + m.aliases), "source": m.sources[0]})
    st.dataframe(pd.DataFrame(models), hide_index=True, width="stretch")

    st.subheader(t("graph", lang))
    focus = st.selectbox(t("focus", lang), [None] + sorted(kb.root_causes), key="kb_focus",
                         format_func=lambda v: t("everything", lang) if v is None else v)
    g = build_graph(kb)
    if focus:
        n = node("root_cause", focus)
        g = g.subgraph({n} | nx.descendants(g, n))
    dot = to_dot(g)
    st.graphviz_chart(dot)
    with st.expander("DOT"):
        st.code(dot, language="text")
