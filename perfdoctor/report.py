"""Render a Diagnosis as text, JSON or the Markdown report an engineer pastes into the incident ticket."""
import json

from perfdoctor.engine.rank import Diagnosis, Hypothesis
from perfdoctor.kb.loader import KB

LOW_CONFIDENCE = 0.5   # a leading P below this was right about two times in three or less on unseen incidents (README)
CLOSE_CALL = 0.1       # leading two hypotheses this close: the evidence does not separate them yet
RETEST_ALWAYS = "P50/P95/P99 of TTFT, ITL and end-to-end latency (or step time), throughput, cost per token, error rate"


def to_dict(d: Diagnosis, probes: int = 5) -> dict:
    return {
        "hypotheses": [{"id": h.id, "title": h.title, "probability": round(h.probability, 4),
                        "bottlenecks": h.bottlenecks, "layer": h.layer, "chain": h.chain,
                        "evidence": h.evidence, "localization": h.localization, "remedies": h.remedies}
                       for h in d.hypotheses],
        "next_probes": [probe_dict(p) for p in d.next_probes[:probes]],
        "observations": {f: {"present": o.present, "observed": o.detail, "entities": o.entities}
                         for f, o in sorted(d.observations.items())},
        "ceilings": [ceiling_dict(c) for c in d.ceilings],
        "confidence": confidence_line(d),
        "warnings": d.warnings,
    }


def ceiling_dict(c) -> dict:
    return {"id": c.id, "title": c.title, "value": c.value, "unit": c.unit, "formula": c.formula,
            "inputs": c.inputs, "observed": c.observed,
            "fraction_of_ceiling": None if c.fraction_of_ceiling is None else round(c.fraction_of_ceiling, 4)}


def ceilings_text(ceilings) -> str:
    if not ceilings:
        return "Hardware ceilings: none (needs context.gpu and a model shape; see `perfdoctor ceiling`)"
    out = ["Hardware ceilings (observed vs the best this hardware allows):"]
    for c in ceilings:
        frac = f"  observed {c.fraction_of_ceiling:.0%} of it" if c.fraction_of_ceiling is not None else ""
        out.append(f"- {c.title}: {c.value:.4g} {c.unit}{frac}")
        out.append(f"    {c.formula}")
    return "\n".join(out)


def probe_dict(p) -> dict:
    return {"id": p.id, "title": p.title, "signals": p.signals, "command": p.command, "promql": p.promql,
            "cost": p.cost, "disruptive": p.disruptive, "gain_bits": round(p.gain_bits, 4),
            "gain_per_min": round(p.score, 4)}


def to_json(d: Diagnosis, probes: int = 5) -> str:
    return json.dumps(to_dict(d, probes), indent=2, ensure_ascii=False)


def confidence(d: Diagnosis) -> str | None:
    """'low' when the leader is weak, 'close' when the second is close behind, else None: the ranking is then
    a shortlist rather than a verdict."""
    hs = d.hypotheses
    if not hs or not d.observations:
        return None
    if hs[0].probability < LOW_CONFIDENCE:
        return "low"
    if len(hs) > 1 and hs[0].probability - hs[1].probability < CLOSE_CALL:
        return "close"
    return None


def weak_leader_record(p: float) -> str:
    """How often a leader this weak was right on the holdout (README, calibration): 33% under 0.3, 65% in 0.3-0.5."""
    return "fewer than half the time" if p < 0.3 else "about two times in three"


def confidence_line(d: Diagnosis) -> str | None:
    hs, kind = d.hypotheses, confidence(d)
    if kind == "low":
        return (f"Low confidence: the leading cause has P={hs[0].probability:.2f}. On the incident library's unseen "
                f"cases a leader this weak was right {weak_leader_record(hs[0].probability)}: take the next probes "
                "before acting.")
    if kind == "close":
        return (f"Close call: {hs[0].id} (P={hs[0].probability:.2f}) and {hs[1].id} (P={hs[1].probability:.2f}) are "
                "not yet told apart; the next probes are ranked to separate them.")
    return None


def chain_line(h: Hypothesis, per_path: int = 3) -> str:
    """One line per path: cause -> mechanism -> observed findings (the first `per_path` of them)."""
    lines = []
    for path in h.chain:
        steps = path["findings"]
        seen = "; ".join(f"{s['title']} [{s['observed']}]" for s in steps[:per_path])
        if len(steps) > per_path:
            seen += f"; +{len(steps) - per_path} more"
        if path["mechanism"]:
            lines.append(f"{h.id} -> {path['title']} (P={path['probability']:.2f}) -> {seen}")
        elif path["strength"] is not None:   # a mode of the cause
            lines.append(f"{h.id} -> {path['title']} -> {seen}")
        else:
            lines.append(f"{h.id} -> {seen}")
    return "\n".join(lines)


def to_text(d: Diagnosis, show: int = 5, probes: int = 5) -> str:
    out = []
    for w in d.warnings:
        out.append(f"warning: {w}")
    if d.warnings:
        out.append("")
    out.append("Root-cause hypotheses (posterior probability; several can hold at once):")
    if note := confidence_line(d):
        out.append(note)
    for rank, h in enumerate(d.hypotheses[:show], 1):
        out.append(f"{rank}. {h.id}  P={h.probability:.3f}  [{', '.join(h.bottlenecks)}; {h.layer}]")
        out.append(f"   {h.title}: {h.description}")
        for line in chain_line(h).splitlines():
            out.append(f"   chain: {line}")
        if h.evidence["for"]:
            out.append("   for: " + "; ".join(_evidence_item(e) for e in h.evidence["for"][:5]))
        if h.evidence["against"]:
            out.append("   against: " + "; ".join(_evidence_item(e) for e in h.evidence["against"][:5]))
        out.append(f"   where: {h.localization['text']}")
        for r in h.remedies:
            out.append(f"   remedy: {r['title']} ({r['kind']}). Risk: {r['counterexample']}")
    out.append("")
    out.append(ceilings_text(d.ceilings))
    out.append("")
    out.append(probes_text(d.next_probes[:probes]))
    return "\n".join(out) + "\n"


def probes_text(probes) -> str:
    out = ["Next probes (expected information gain per minute):"]
    if not probes:
        out.append("  none: every signal a probe fills is already known")
    for p in probes:
        flag = ", disruptive" if p.disruptive else ""
        out.append(f"- {p.id}: {p.title} ({p.cost:g} min{flag}; {p.gain_bits:.3f} bits)")
        out.append(f"    fills: {', '.join(p.signals)}")
        out.append(f"    run: {p.command}")
        if p.promql:
            out.append(f"    promql: {p.promql}")
    return "\n".join(out)


def to_markdown(d: Diagnosis, kb: KB, show: int = 3, probes: int = 5) -> str:
    ctx, snap = d.snapshot.context, d.snapshot
    gpus = f"{ctx.get('nodes', '?')} nodes x {ctx.get('gpus_per_node', '?')} {ctx.get('gpu', 'GPU (unknown model)')}"
    named = ctx.get("model")
    model = ctx.get("model_params_b") or (named.get("params_b") if isinstance(named, dict) else None)
    versions = ", ".join(f"{k} {v}" for k, v in (ctx.get("versions") or {}).items()) or "not given"
    top = d.hypotheses[0] if d.hypotheses else None
    out = [f"# Performance incident: {top.title if top else 'no hypothesis'}", "",
           "## Setting", "",
           f"- Workload: {ctx.get('workload', 'not given')}; engine: {ctx.get('engine', 'not given')}; "
           f"model: {named if isinstance(named, str) else ''}{' ' if isinstance(named, str) and model else ''}"
           f"{str(model) + 'B parameters' if model else ('' if isinstance(named, str) else 'not given')}",
           f"- Hardware: {gpus}",
           f"- Versions: {versions}",
           f"- What changed before the regression: {', '.join(snap.changes) if snap.changes else ('nothing reported' if snap.changes == [] else 'not asked yet')}",
           f"- Evidence: {snap.source}", "",
           "## What got slower", ""]
    moved = [(f, o) for f, o in sorted(d.observations.items()) if o.present]
    out += [f"- {kb.findings[f].title}: {o.detail}" + (f" ({', '.join(o.entities[:8])})" if o.entities else "")
            for f, o in moved] or ["- no finding present"]
    out += ["", "## Metric definitions", ""]
    here, sources = ctx.get("metric_definitions") or {}, ctx.get("metric_sources") or {}
    for sid in sorted(s for s in snap.current if s in kb.signals):
        sig = kb.signals[sid]
        line = f"- `{sid}` ({sig.unit}): {sig.definition}"
        if sid in sources:
            line += f" Read from `{sources[sid]}`."
        if sid in here:
            line += f" As measured here: {here[sid]}"
        out.append(line)
    out += ["", "## Causal hypotheses", ""]
    if note := confidence_line(d):
        out += [f"> {note}", ""]
    for rank, h in enumerate(d.hypotheses[:show], 1):
        out += [f"### {rank}. {h.title} (`{h.id}`), P = {h.probability:.2f}", "",
                f"{h.description}", "",
                f"Bottlenecks: {', '.join(h.bottlenecks)}. Layer: {h.layer}. Where: {h.localization['text']}.", ""]
        if h.chain:
            out += ["Causal chain:", "", "```", chain_line(h), "```", ""]
        if h.evidence["for"] or h.evidence["against"]:
            out.append("| evidence | observed | shift in P |")
            out.append("|---|---|---|")
            for e in h.evidence["for"][:6] + h.evidence["against"][:6]:
                out.append(f"| {e['finding']} ({'present' if e['present'] else 'absent'}) | {e['observed']} | {e['shift']:+.3f} |")
            out.append("")
        if h.remedies:
            out += ["| remedy | how it can fail (counterexample) | cannot fix | re-test |", "|---|---|---|---|"]
            for r in h.remedies:
                out.append(f"| {r['title']} ({r['kind']}) | {r['counterexample']} | {'; '.join(r['cannot_fix'])} | "
                           f"{', '.join(r['retest'])} |")
            out.append("")
    if d.ceilings:
        out += ["## Hardware ceilings", "", "| ceiling | value | observed share | formula |", "|---|---|---|---|"]
        for c in d.ceilings:
            share = f"{c.fraction_of_ceiling:.0%}" if c.fraction_of_ceiling is not None else "-"
            out.append(f"| {c.title} | {c.value:.4g} {c.unit} | {share} | {c.formula} |")
        out.append("")
    out += ["## What to re-test after any change", "",
            f"- {RETEST_ALWAYS}, against the same baseline window and the same metric definitions.", "",
            "## Next measurements", ""]
    for p in d.next_probes[:probes]:
        out.append(f"- **{p.title}** ({p.cost:g} min{', disruptive' if p.disruptive else ''}): `{p.command}`"
                   f" (fills {', '.join(p.signals)})")
    if d.warnings:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in d.warnings]
    return "\n".join(out) + "\n"


def _evidence_item(e: dict) -> str:
    """One evidence entry of the text report; an absent finding reads 'no <finding>', so that 'for: no
    gpu_util_high' cannot be taken for a busy GPU."""
    return f"{'' if e['present'] else 'no '}{e['finding']} ({e['shift']:+.3f})"
