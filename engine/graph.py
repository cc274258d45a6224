"""The causal graph: root causes -> mechanisms -> findings <- signals <- probes, as a pure function of the KB."""
import networkx as nx

from perfdoctor.kb.loader import KB


def node(kind: str, entry_id: str) -> str:
    return f"{kind}:{entry_id}"


def build_graph(kb: KB) -> nx.DiGraph:
    """Every KB entry becomes a node; causal edges carry their noisy-OR strength.

    Edges whose target is not in the KB are kept, pointing at a node with kind "missing",
    so that `kb check` can report them instead of losing them.
    """
    g = nx.DiGraph()
    for rc in kb.root_causes.values():
        g.add_node(node("root_cause", rc.id), kind="root_cause", title=rc.title)
    for mech in kb.mechanisms.values():
        g.add_node(node("mechanism", mech.id), kind="mechanism", title=mech.title)
    for fid, finding in kb.findings.items():
        g.add_node(node("finding", fid), kind="finding", title=finding.title)
    for sid, signal in kb.signals.items():
        g.add_node(node("signal", sid), kind="signal", title=signal.title)
    g.add_node(node("signal", "changes"), kind="signal", title="what changed before the regression")
    for probe in kb.probes.values():
        g.add_node(node("probe", probe.id), kind="probe", title=probe.title)

    def edge(src, dst_kind, dst_id, **attrs):
        dst = node(dst_kind, dst_id)
        if dst not in g:
            g.add_node(dst, kind="missing", expected=dst_kind, title=dst_id)
        g.add_edge(src, dst, **attrs)

    for rc in kb.root_causes.values():
        for eff in rc.mechanisms:
            edge(node("root_cause", rc.id), "mechanism", eff.target, strength=eff.strength, role="drives")
        for eff in rc.signatures:
            edge(node("root_cause", rc.id), "finding", eff.target, strength=eff.strength, role="signature")
    for mech in kb.mechanisms.values():
        for eff in mech.effects:
            edge(node("mechanism", mech.id), "finding", eff.target, strength=eff.strength, role="shows")
    for fid, sid in kb.finding_signal.items():
        edge(node("signal", sid), "finding", fid, role="measured_as")
    for probe in kb.probes.values():
        for sid in probe.fills:
            edge(node("probe", probe.id), "signal", "changes" if sid == "changes" else sid, role="fills")
    return g


def causal_subgraph(g: nx.DiGraph) -> nx.DiGraph:
    """Only the cause -> mechanism -> finding edges."""
    keep = [(u, v) for u, v, d in g.edges(data=True) if d.get("role") in ("drives", "signature", "shows")]
    return g.edge_subgraph(keep).copy()


def to_dot(g: nx.DiGraph) -> str:
    """DOT text of the causal part of the graph, causes on the left, findings on the right."""
    shapes = {"root_cause": "box", "mechanism": "ellipse", "finding": "note"}
    lines = ["digraph perfdoctor {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];']
    causal = causal_subgraph(g)
    for n, data in causal.nodes(data=True):
        kind = g.nodes[n].get("kind")
        label = n.split(":", 1)[1]
        lines.append(f'  "{n}" [label="{label}", shape={shapes.get(kind, "plaintext")}];')
    for u, v, data in causal.edges(data=True):
        style = ", style=dashed" if data["role"] == "signature" else ""
        lines.append(f'  "{u}" -> "{v}" [label="{data["strength"]:.2f}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
