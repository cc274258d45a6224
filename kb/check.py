"""`kb check`: schema issues from loading plus graph checks, each returning a list of Issues."""
import networkx as nx

from perfdoctor.engine.graph import build_graph, causal_subgraph, node
from perfdoctor.kb.hardware_schema import GpuSpec, Interconnect
from perfdoctor.kb.loader import KB, Issue
from perfdoctor.symptoms.snapshot import CONTEXT_KEYS


def check_kb(kb: KB) -> list[Issue]:
    """All issues: schema problems first, then every graph check."""
    g = build_graph(kb)
    issues = list(kb.issues)
    for check in (check_references, check_acyclic, check_reachable, check_probes,
                  check_finding_roles, check_rules, check_remedies, check_sources, check_unused,
                  check_translations):
        issues.extend(check(kb, g))
    return issues


def _file(kb, entry_id):
    return kb.source_file.get(entry_id, "kb")


def check_references(kb: KB, g: nx.DiGraph) -> list[Issue]:
    out = []
    for rc in kb.root_causes.values():
        for i, eff in enumerate(rc.mechanisms):
            if eff.target not in kb.mechanisms:
                out.append(Issue(_file(kb, rc.id), rc.id, f"mechanisms[{i}].target", f"unknown mechanism '{eff.target}'"))
        for i, eff in enumerate(rc.signatures):
            if eff.target not in kb.findings:
                out.append(Issue(_file(kb, rc.id), rc.id, f"signatures[{i}].target", f"unknown finding '{eff.target}'"))
        modes = {m.id for m in rc.modes}
        for i, eff in enumerate(rc.signatures):
            if eff.mode is not None and eff.mode not in modes:
                out.append(Issue(_file(kb, rc.id), rc.id, f"signatures[{i}].mode", f"unknown mode '{eff.mode}'"))
        for m in rc.modes:
            if not any(e.mode == m.id for e in rc.signatures):
                out.append(Issue(_file(kb, rc.id), rc.id, f"modes.{m.id}", "a mode needs at least one signature"))
        for i, sid in enumerate(rc.scope.before_from):
            if sid not in kb.signals:
                out.append(Issue(_file(kb, rc.id), rc.id, f"scope.before_from[{i}]", f"unknown signal '{sid}'"))
    for rc in kb.root_causes.values():
        for i, eff in enumerate(rc.signatures):
            others = [o.id for o in kb.root_causes.values() if o.id != rc.id and any(e.target == eff.target for e in o.signatures)]
            if eff.mode is not None and others:
                out.append(Issue(_file(kb, rc.id), rc.id, f"signatures[{i}]",
                                 f"'{eff.target}' belongs to mode '{eff.mode}', so no other cause may claim it ({', '.join(others)})"))
    for mech in kb.mechanisms.values():
        for i, eff in enumerate(mech.effects):
            if eff.target not in kb.findings:
                out.append(Issue(_file(kb, mech.id), mech.id, f"effects[{i}].target", f"unknown finding '{eff.target}'"))
    for probe in kb.probes.values():
        for i, sid in enumerate(probe.fills):
            if sid != "changes" and sid not in kb.signals:
                out.append(Issue(_file(kb, probe.id), probe.id, f"fills[{i}]", f"unknown signal '{sid}'"))
    for sig in kb.signals.values():
        for key in (sig.from_context or "").split(" / "):
            head, _, field_name = key.partition(".")
            catalog = {"gpu": GpuSpec, "interconnect": Interconnect}.get(head)
            if key and (head not in CONTEXT_KEYS or (field_name and (catalog is None
                                                                     or not _catalog_field(catalog, field_name)))):
                out.append(Issue(_file(kb, sig.id), sig.id, "from_context", f"unknown context key '{key}'"))
    for tech in kb.technologies.values():
        for i, sid in enumerate(tech.retest):
            if sid not in kb.signals:
                out.append(Issue(_file(kb, tech.id), tech.id, f"retest[{i}]", f"unknown signal '{sid}'"))
    return out


def _catalog_field(catalog, name: str) -> bool:
    """A catalog field or a derived property (GpuSpec.nvlink_links_if_none) that `from_context` can read."""
    return name in catalog.model_fields or isinstance(getattr(catalog, name, None), property)


def check_acyclic(kb: KB, g: nx.DiGraph) -> list[Issue]:
    causal = causal_subgraph(g)
    if nx.is_directed_acyclic_graph(causal):
        return []
    cycle = " -> ".join(u for u, _ in nx.find_cycle(causal))
    return [Issue("kb", "", "", f"causal graph has a cycle: {cycle}")]


def check_reachable(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Every root cause must reach at least one finding that some signal measures."""
    out = []
    for rc in kb.root_causes.values():
        reach = nx.descendants(g, node("root_cause", rc.id))
        if not any(g.nodes[n].get("kind") == "finding" for n in reach):
            out.append(Issue(_file(kb, rc.id), rc.id, "mechanisms", "reaches no observable finding"))
    for mech in kb.mechanisms.values():
        if not any(g.nodes[n].get("kind") == "finding" for n in g.successors(node("mechanism", mech.id))):
            out.append(Issue(_file(kb, mech.id), mech.id, "effects", "mechanism shows no finding"))
    return out


def check_probes(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Every signal (hence every finding) must be filled by at least one probe."""
    filled = {sid for p in kb.probes.values() for sid in p.fills}
    out = []
    for sid in list(kb.signals) + (["changes"] if kb.changes else []):
        if sid not in filled:
            out.append(Issue(_file(kb, sid) if sid in kb.signals else "kb/probes.yaml", sid, "", "no probe fills this signal"))
    return out


def check_finding_roles(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """A finding is shown by mechanisms or is a root-cause signature, never both (the inference relies on it)."""
    out = []
    for fid in kb.findings:
        roles = {d["role"] for _, _, d in g.in_edges(node("finding", fid), data=True)}
        if {"shows", "signature"} <= roles:
            out.append(Issue(_file(kb, fid), fid, "", "finding is both a mechanism effect and a root-cause signature"))
    return out


def check_rules(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Rules must fit their signal's kind, and any second signal they name must exist."""
    numeric = {"above", "at_least", "below", "ratio_up", "ratio_down", "over_slo", "outlier", "fraction_of", "plus",
               "tail_ratio_up", "spread_above", "parts_share", "added_share"}
    out = []
    for sid, signal in kb.signals.items():
        for f in signal.findings:
            kind = f.rule.kind
            bad = (kind in numeric and signal.kind in ("bool", "string", "list")) or \
                  (kind == "contains_any" and signal.kind != "list") or \
                  (kind in ("differs_from_baseline", "left_baseline_value") and signal.kind not in ("bool", "string", "list"))
            if bad:
                out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule", f"'{kind}' does not apply to a {signal.kind} signal"))
            pair = f.rule.fraction_of or f.rule.plus
            others = [pair.signal] if pair else \
                [f.rule.tail_ratio_up.median_signal] if f.rule.tail_ratio_up else \
                f.rule.parts_share.parts if f.rule.parts_share else \
                f.rule.added_share.parts if f.rule.added_share else []
            for cond in f.rule.conditions:
                others = others + [cond.signal]
                if cond.signal in kb.signals and kb.signals[cond.signal].kind in ("string", "list"):
                    out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule.when",
                                     f"a condition needs a numeric or bool signal (true reads as 1), '{cond.signal}' is not"))
            if f.rule.complement and (kind not in ("ratio_up", "ratio_down") or signal.kind != "fraction"):
                out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule.complement",
                                 "complement applies to a ratio rule on a fraction signal"))
            for change in f.rule.unless_changed or []:
                if change not in kb.changes:
                    out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule.unless_changed",
                                     f"unknown change '{change}'"))
            for other in others:
                if other not in kb.signals:
                    out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule", f"unknown signal '{other}'"))
            if kind == "contains_any" and signal.values:
                for v in set(f.rule.contains_any) - set(signal.values):
                    out.append(Issue(_file(kb, sid), sid, f"findings.{f.id}.rule", f"'{v}' is not one of the signal's values"))
    return out


def check_remedies(kb: KB, g: nx.DiGraph) -> list[Issue]:
    out = []
    for rc in kb.root_causes.values():
        for i, rid in enumerate(rc.remedies):
            if rid not in kb.technologies:
                out.append(Issue(_file(kb, rc.id), rc.id, f"remedies[{i}]", f"unknown technology or action '{rid}'"))
    return out


def check_sources(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Sources must look like URLs (or name a practice with 'practice:')."""
    out = []
    for table in (kb.root_causes, kb.mechanisms, kb.technologies, kb.signals):
        for entry in table.values():
            for i, src in enumerate(entry.sources):
                if not (src.startswith("https://") or src.startswith("http://") or src.startswith("practice:")):
                    out.append(Issue(_file(kb, entry.id), entry.id, f"sources[{i}]", f"not a URL or 'practice:' note: {src!r}"))
            if table is not kb.signals and not entry.sources:
                out.append(Issue(_file(kb, entry.id), entry.id, "sources", "no source given"))
    return out


def check_unused(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Findings no cause or mechanism explains carry no evidence: a warning, so they get wired or removed."""
    out = []
    for fid in kb.findings:
        if g.in_degree(node("finding", fid)) <= 1:  # only the signal's own measured_as edge
            out.append(Issue(_file(kb, fid), fid, "", "no mechanism or root cause explains this finding", "warning"))
    return out


TEXT_FIELDS = {  # KB table -> the fields a user reads, each needing a Chinese version
    "root_causes": ("title", "description"), "mechanisms": ("title", "description"),
    "signals": ("title", "definition"), "findings": ("title",), "probes": ("title",),
    "changes": ("title", "description"), "technologies": ("title", "description", "cannot_fix", "counterexample"),
}


def check_translations(kb: KB, g: nx.DiGraph) -> list[Issue]:
    """Every user-facing text needs its zh version in kb/i18n/zh/<table>.yaml; changed_* findings come from changes."""
    out = []
    for table_name, fields in TEXT_FIELDS.items():
        for entry_id, entry in getattr(kb, table_name).items():
            if table_name == "findings" and entry_id.startswith("changed_"):
                continue
            zh = entry.zh
            missing = [f for f in fields if zh is None or not getattr(zh, f)]
            if missing:
                out.append(Issue(f"kb/i18n/zh/{table_name}.yaml", entry_id, ", ".join(missing),
                                 "no Chinese translation", "warning"))
            elif table_name == "technologies" and len(zh.cannot_fix) != len(entry.cannot_fix):
                out.append(Issue(f"kb/i18n/zh/{table_name}.yaml", entry_id, "cannot_fix",
                                 f"{len(zh.cannot_fix)} items, English has {len(entry.cannot_fix)}"))
    return out
