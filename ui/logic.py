"""Plain helpers behind the pages (no Streamlit here): answers -> snapshot, KB look-ups, DOT of a chain."""
import copy
import tempfile
from pathlib import Path

import yaml

from perfdoctor.errors import InputError
from perfdoctor.kb.loader import KB
from perfdoctor.symptoms.snapshot import Snapshot, parse_snapshot
from perfdoctor.yamlio import load_text

# headline symptom -> (first probe to show, workload it implies or None); no signal value is made up
HEADLINES = {
    "h_throughput": ("serving_load", "inference"),
    "h_ttft": ("serving_latency_breakdown", "inference"),
    "h_itl": ("serving_latency_breakdown", "inference"),
    "h_p99": ("serving_latency_breakdown", "inference"),
    "h_step": ("training_step_profile", "training"),
    "h_node": ("nvidia_smi_query", None),
}
RATIO_RULES = ("ratio_up", "ratio_down", "tail_ratio_up")


def empty_answers(headline: str | None = None) -> dict:
    workload = HEADLINES.get(headline, (None, None))[1]
    return {"context": {"workload": workload} if workload else {}, "changes": None, "baseline": {}, "current": {}}


def needs_baseline(kb: KB, sid: str) -> bool:
    return any(f.rule.kind in RATIO_RULES for f in kb.signals[sid].findings)


def parse_value(text: str):
    """'' -> None (don't know); '1.9' -> 1.9; 'gpu0: 1980, gpu1: 1095' -> {'gpu0': 1980, 'gpu1': 1095}."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    value = load_text(text if text.startswith("{") else "{" + text + "}", "answer")
    if not isinstance(value, dict):
        raise InputError("answer", text, "expected a number or entity: value pairs")
    return {str(k): v for k, v in value.items()}


def to_snapshot(kb: KB, answers: dict, where: str = "answers") -> Snapshot:
    """The answers as a validated Snapshot; with nothing observed yet, an empty one (priors only)."""
    if not answers["current"]:
        return Snapshot(source=where, context=dict(answers["context"]), changes=answers["changes"])
    data = {k: v for k, v in answers.items() if v is not None}
    return parse_snapshot(data, kb, where)


def answers_from_text(kb: KB, text: str, where: str) -> dict:
    """A snapshot file's text -> answers (validated; raises InputError)."""
    snap = parse_snapshot(load_text(text, where), kb, where)
    return {"context": snap.context, "changes": snap.changes, "baseline": snap.baseline, "current": snap.current}


def answers_with_artifact(kb: KB, answers: dict, data: bytes, name: str, part: str) -> tuple[dict, str, list[str]]:
    """Answers plus one uploaded tool output (kind read from its content) as the current or the baseline state:
    (new answers, kind, notes). Values already answered win, with a note. Raises InputError on bad input."""
    from perfdoctor.symptoms.evidence import add_artifact
    base = Snapshot(source="answers", context=copy.deepcopy(answers["context"]), changes=answers["changes"],
                    baseline=copy.deepcopy(answers["baseline"]), current=copy.deepcopy(answers["current"]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / Path(name).name
        path.write_bytes(data)
        add_artifact(kb, base, str(path), part)
    kinds = [k.split("/")[-1] for k in base.context.get("tools", {}) if k not in answers["context"].get("tools", {})]
    notes = [w.replace(str(path), name) for w in base.warnings]
    return ({"context": base.context, "changes": base.changes, "baseline": base.baseline, "current": base.current},
            kinds[0] if kinds else "", notes)


def answers_yaml(answers: dict) -> str:
    data = {k: v for k, v in answers.items() if v is not None}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def explained_findings(kb: KB, cause_id: str) -> set[str]:
    """Findings a root cause can produce: through its mechanisms, or directly (signatures)."""
    rc = kb.root_causes[cause_id]
    out = {e.target for e in rc.signatures}
    for eff in rc.mechanisms:
        mech = kb.mechanisms.get(eff.target)
        out |= {e.target for e in mech.effects} if mech else set()
    return out


def probe_findings(kb: KB, probe_id: str) -> set[str]:
    return {f for f, sid in kb.finding_signal.items() if sid in kb.probes[probe_id].fills}


def probes_for_cause(kb: KB, cause_id: str) -> list[str]:
    explained = explained_findings(kb, cause_id)
    return [p for p in kb.probes if probe_findings(kb, p) & explained]


def distinguishes(kb: KB, probe_id: str, hypotheses, top: int = 5) -> list:
    """The leading hypotheses whose findings this probe would show."""
    seen = probe_findings(kb, probe_id)
    return [h for h in hypotheses[:top] if explained_findings(kb, h.id) & seen]


def _q(text) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"')


def chain_dot(h) -> str:
    """DOT of a hypothesis' causal chain: cause -> mechanism (P) or mode -> observed finding."""
    lines = ["digraph chain {", "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=10];',
             f'  "{_q(h.id)}" [shape=box, style=filled, fillcolor="#fde2e2", label="{_q(h.title)}"];']
    for path in h.chain:
        src = h.id
        if path["mechanism"]:
            src = "m:" + path["mechanism"]
            lines.append(f'  "{_q(src)}" [shape=ellipse, label="{_q(path["title"])}\\nP={path["probability"]:.2f}"];')
            lines.append(f'  "{_q(h.id)}" -> "{_q(src)}" [label="{path["strength"]:.2f}"];')
        elif path["strength"] is not None:   # a mode of the cause
            src = "mode:" + h.id + ":" + path["title"]
            lines.append(f'  "{_q(src)}" [shape=ellipse, style=dashed, label="{_q(path["title"])}"];')
            lines.append(f'  "{_q(h.id)}" -> "{_q(src)}" [style=dashed, label="{path["strength"]:.2f}"];')
        for step in path["findings"]:
            fid = "f:" + step["id"]
            lines.append(f'  "{_q(fid)}" [shape=note, label="{_q(step["title"])}\\n{_q(step["observed"])}"];')
            style = "" if path["mechanism"] else " [style=dashed]"
            lines.append(f'  "{_q(src)}" -> "{_q(fid)}"{style};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def outlier_entities(d, sid: str) -> set[str]:
    """Entities flagged by any observation of signal `sid`."""
    return {e for o in d.observations.values() if o.signal == sid for e in o.entities}


def mean_value(v):
    if isinstance(v, dict):
        nums = [x for x in v.values() if isinstance(x, (int, float)) and not isinstance(x, bool)]
        return sum(nums) / len(nums) if nums else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
