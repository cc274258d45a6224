"""Diagnosis: ranked hypotheses with causal chains, evidence for and against, localization and remedies."""
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from perfdoctor.engine.ceilings import CEILING_INPUTS, Ceiling, compute_ceilings
from perfdoctor.errors import InputError
from perfdoctor.engine.findings import Observation, evaluate
from perfdoctor.engine.inference import ExactInference, Joint
from perfdoctor.engine.network import NoisyOrNetwork, compile_network
from perfdoctor.engine.probes import ProbeSuggestion, rank_probes
from perfdoctor.kb.hardware_schema import match_gpu, match_interconnect
from perfdoctor.kb.loader import KB, load_kb, require_valid
from perfdoctor.symptoms.snapshot import Snapshot

MIN_EVIDENCE_SHIFT = 0.005
CHAIN_MIN_PROBABILITY = 0.5  # a mechanism is part of the explanation when it is more likely on than off
IMPOSSIBLE_FRACTION = 1.1  # observed above a hardware ceiling: the inputs, not the hardware, are wrong
OFF_CONTEXT_HINTS = {
    None: "check context.tp, gpus_per_replica, replicas",
    "running_batch_cap": "check context.max_num_seqs",
    "call_batch_cap": "check context.max_num_seqs against the calls' batch (engine_call_batch)",
    "client_inflight": "the engines hold more than these clients send: other traffic, or check context.client_concurrency",
    "client_inflight_running": "the engines run more than these clients send: other traffic, or check "
                               "context.client_concurrency",
}


@dataclass
class Hypothesis:
    id: str
    title: str
    probability: float
    bottlenecks: list[str]
    layer: str
    description: str
    chain: list[dict]
    evidence: dict
    localization: dict
    remedies: list[dict]


@dataclass
class Diagnosis:
    snapshot: Snapshot
    observations: dict[str, Observation]
    hypotheses: list[Hypothesis]
    next_probes: list[ProbeSuggestion]
    warnings: list[str] = field(default_factory=list)
    ceilings: list[Ceiling] = field(default_factory=list)


def _context_fact(context: dict, key: str):
    """context[key], or for 'gpu.FIELD' / 'interconnect.FIELD' that field of the catalog entry the context names."""
    head, _, field_name = key.partition(".")
    if not field_name:
        return context.get(key)
    if not context.get(head):
        return None
    entry = (match_gpu if head == "gpu" else match_interconnect)(str(context[head]))
    return getattr(entry, field_name, None) if entry is not None else None


def context_value(context: dict, expression: str):
    """The value of a signal's `from_context` expression ('key' or 'key / key'); None when an input is missing."""
    keys = expression.split(" / ")
    values = [_context_fact(context, k) for k in keys]
    if any(v is None for v in values):
        return None
    if len(values) == 1:
        return values[0]
    return values[0] / values[1] if values[1] else None


def known_gpus(context: dict) -> int | None:
    """How many GPUs (or replicas) the context says the job spans; None when it does not say."""
    counts = [context.get(k) for k in ("gpus", "world_size", "replicas")]
    if context.get("nodes") and context.get("gpus_per_node"):
        counts.append(context["nodes"] * context["gpus_per_node"])
    if context.get("tp"):
        counts.append(context["tp"] * (context.get("pp") or 1) * (context.get("dp") or 1))
    counts = [c for c in counts if isinstance(c, (int, float))]
    return max(counts) if counts else None


# An absent finding counts as this power of its likelihood: absences in incident data are often fill-ins,
# averages or thresholds just missed. Chosen on the library (0.2-1.0 tried; 0.4-0.6 best on AC@1 and AC@3,
# lower still improves Brier but hardly counts an absence), checked on the holdout.
ABSENT_EVIDENCE_WEIGHT = 0.5
ENGINE_SOURCES = {"vllm", "vllm_v0", "sglang", "tgi"}   # metrics only an inference engine reports


class Engine:
    """Loaded once (cold start): the KB, its compiled network and the precomputed inference tables."""

    def __init__(self, kb: KB):
        self.kb = require_valid(kb)
        self.net: NoisyOrNetwork = compile_network(kb)
        self.engine_signals = {sid for sid, s in kb.signals.items() if any(m.source in ENGINE_SOURCES for m in s.metrics)}
        self.inference = ExactInference(self.net, ABSENT_EVIDENCE_WEIGHT)

    @classmethod
    def load(cls, kb_root=None) -> "Engine":
        return cls(load_kb(kb_root) if kb_root else load_kb())

    def priors(self, context: dict, before_known: bool = True, generates: bool = False,
               readings: frozenset = frozenset()) -> np.ndarray:
        """Cause priors for this context: scaled down where the context rules a cause out (see schema.Scope).

        `before_known` is False when the snapshot has neither a baseline nor a change list. `generates` is True
        when a training job also generates (context.rollouts: RL post-training), or its snapshot carries readings
        only an inference engine reports (rollouts on vLLM or SGLang): the inference causes apply to that phase.
        `readings` are the signals the snapshot carries: a cause's `before_from` reading stands in for its before-state.
        """
        prior = self.net.prior.copy()
        workload, nodes, tp = context.get("workload"), context.get("nodes"), context.get("tp")
        workloads = {workload, "inference"} if generates else {workload}
        gpu = match_gpu(str(context["gpu"])) if context.get("gpu") else None
        link = match_interconnect(str(context["interconnect"])) if context.get("interconnect") else None
        no_nvlink = gpu is not None and not gpu.nvlink_gb_s and not getattr(gpu, "nvlink_bridge_gb_s", None)
        no_rdma = link is not None and link.kind == "ethernet"
        units = known_gpus(context)
        for i, cid in enumerate(self.net.causes):
            scope = self.kb.root_causes[cid].scope
            if (workload and not workloads & set(scope.workloads)) or (nodes and nodes < scope.min_nodes) \
                    or (tp and tp < scope.min_tp) or (scope.needs_nvlink and no_nvlink) \
                    or (scope.needs_rdma and no_rdma) or (units and units < scope.min_gpus):
                prior[i] *= scope.outside
            if not before_known and not readings & set(scope.before_from):
                prior[i] *= scope.without_before
        return prior

    def evidence(self, observations: dict[str, Observation]) -> dict[str, bool]:
        return {f: o.present for f, o in observations.items() if o.present is not None
                and (f in self.inference.mech_index or f in self.inference.sig_index)}

    def with_ceilings(self, snap: Snapshot) -> tuple[Snapshot, list[Ceiling], list[str]]:
        """`snap` plus the observed/ceiling signals the KB derives from hardware ceilings (unless given)."""
        base_dir = Path(snap.source).parent if Path(snap.source).exists() else None
        try:
            ceilings, notes = compute_ceilings(snap.context, snap.current, base_dir=base_dir)
        except (TypeError, ValueError, AttributeError) as exc:  # odd values inside a model config.json
            raise InputError(snap.source, "context.model_config", f"cannot read the model shape: {exc}") from None
        by_id = {c.id: c for c in ceilings}
        derived = {}
        for sid, signal in self.kb.signals.items():
            c = by_id.get(signal.from_ceiling)
            if c is None or c.fraction_of_ceiling is None or sid in snap.current:
                continue
            if c.fraction_of_ceiling > IMPOSSIBLE_FRACTION:
                notes.append(f"{c.id}: observed is {c.fraction_of_ceiling:.2f}x the ceiling, so the context is off "
                             f"({OFF_CONTEXT_HINTS.get(c.id, OFF_CONTEXT_HINTS[None])}); {sid} not used")
                continue
            derived[sid] = c.fraction_of_ceiling
        derived_before = self._baseline_ceilings(snap)
        for sid, signal in self.kb.signals.items():
            if signal.from_context and sid not in snap.current:
                value = context_value(snap.context, signal.from_context)
                if signal.kind == "bool" and isinstance(value, str):   # a named component (gateway: envoy) is there
                    value = value.strip().lower() not in ("", "none", "no", "false")
                if value is not None:
                    derived[sid] = value
        name = snap.context.get("interconnect")
        if name and match_interconnect(str(name)) is None and not any(n.startswith("unknown interconnect") for n in notes):
            notes.append(f"unknown interconnect {str(name)!r} (context.interconnect): facts and ceilings that need "
                         "its bandwidth are skipped")
        warnings = [n for n in notes if n.startswith(("unknown GPU", "unknown interconnect", "model '"))
                    or "the context is off" in n]
        baseline = {**snap.baseline, **{k: v for k, v in derived_before.items() if k in derived}}
        return replace(snap, current={**snap.current, **derived}, baseline=baseline), ceilings, warnings

    def _baseline_ceilings(self, snap: Snapshot) -> dict:
        """The same ceiling fractions computed from the baseline values, so that a shortfall against a ceiling
        that already held before the regression reads as 'held in the baseline too', not as a new finding."""
        if not snap.baseline:
            return {}
        try:
            ceilings, _ = compute_ceilings(snap.context, snap.baseline, base_dir=None)
        except (TypeError, ValueError, AttributeError):
            return {}
        by_id = {c.id: c for c in ceilings}
        out = {}
        for sid, signal in self.kb.signals.items():
            c = by_id.get(signal.from_ceiling)
            if c is not None and c.fraction_of_ceiling is not None and c.fraction_of_ceiling <= IMPOSSIBLE_FRACTION \
                    and sid not in snap.baseline:
                out[sid] = c.fraction_of_ceiling
        return out

    def diagnose(self, snap: Snapshot, top: int | None = None, with_probes: bool = True,
                 asked: set[str] = frozenset()) -> Diagnosis:
        """Rank every root cause for `snap`; `asked` names signals or probes already tried without an answer."""
        snap, ceilings, ceiling_warnings = self.with_ceilings(snap)
        observations = evaluate(self.kb, snap)
        generates = bool(snap.context.get("rollouts")) or bool(self.engine_signals & snap.current.keys())
        prior = self.priors(snap.context, before_known=bool(snap.baseline) or snap.changes is not None,
                            generates=generates, readings=frozenset(snap.current))
        joint = self.inference.query(self.evidence(observations), prior)
        order = np.argsort(-joint.cause_post, kind="stable")
        shown = order if top is None else order[:top]
        loo = self._leave_one_out(joint)
        weights = joint.J * joint.L[:, None]
        mech_given = (weights.T @ self.inference.bits) / np.maximum(weights.sum(axis=0), 1e-300)[:, None]
        hyps = [self._hypothesis(int(i), joint, observations, loo, mech_given[i]) for i in shown]
        known = set(snap.current) | ({"changes"} if snap.changes is not None else set()) | set(asked)
        probes = [p for p in rank_probes(self.kb, self.inference, joint, known, snap.context.get("workload"))
                  if p.id not in asked] \
            if with_probes else []
        return Diagnosis(snap, observations, hyps, probes,
                         list(snap.warnings) + ceiling_warnings + self._coverage_warnings(snap, observations, ceilings), ceilings)

    def _coverage_warnings(self, snap, observations, ceilings):
        out = []
        via_ceiling = CEILING_INPUTS if any(c.observed is not None for c in ceilings) else set()
        ratio_only = [sid for sid in snap.current if sid in self.kb.signals and
                      self.kb.signals[sid].findings and
                      all(f.rule.kind in ("ratio_up", "ratio_down") for f in self.kb.signals[sid].findings)
                      and sid not in snap.baseline and sid not in via_ceiling]
        if ratio_only:
            out.append("no baseline for " + ", ".join(sorted(ratio_only)) +
                       ": these signals cannot show a change and were not used")
        if not snap.baseline and snap.changes is None:
            needs = sorted(c for c, rc in self.kb.root_causes.items()
                           if rc.scope.without_before < 1 and not snap.current.keys() & set(rc.scope.before_from))
            if needs:
                out.append("neither a baseline nor a change list: " + ", ".join(needs) + " (a regression against "
                           "an earlier state) ranked down; give `changes` (or [] if nothing changed) or a baseline")
        return out

    def _leave_one_out(self, joint: Joint) -> dict[str, np.ndarray]:
        """P(cause | evidence without f) for every observed finding f.

        Mechanism findings: exact, by dividing f's factor out of L(S). Signature findings: the
        likelihood ratio of f for each cause under the current posterior of its other parents.
        """
        inf, post = self.inference, joint.cause_post
        out = {}
        mech = [(f, inf.mech_index[f], v) for f, v in joint.evidence.items() if f in inf.mech_index]
        if mech:
            factors = np.stack([(1 - inf.P0[:, k]) if v else inf.P0[:, k] ** inf.w for _, k, v in mech], axis=1)
            Lm = joint.L[:, None] / factors
            num, den = joint.J.T @ Lm, joint.D @ Lm
            for col, (f, _, _) in enumerate(mech):
                out[f] = num[:, col] / den[col]
        for f, v in joint.evidence.items():
            k = inf.sig_index.get(f)
            if k is None:
                continue
            if inf.mode_of(k) >= 0:
                out[f] = self._without_moded(joint, k, v)
                continue
            q, q0 = inf.q_sig[:, k], inf.q0_sig[k]
            keep = 1 - post * (1 - q)
            rest = np.prod(keep) / keep
            off_on, off_off = q0 * q * rest, q0 * rest
            lr = q ** inf.w if not v else (1 - off_on) / np.maximum(1 - off_off, 1e-300)
            odds = post / np.maximum(1 - post, 1e-300) / lr
            out[f] = odds / (1 + odds)
        return out

    def _without_moded(self, joint: Joint, k: int, present: bool) -> np.ndarray:
        """P(cause | evidence without moded finding k): its likelihood ratio through its mode, for its cause only."""
        inf, post = self.inference, joint.cause_post
        m = inf.mode_of(k)
        i, s = inf.net.mode_cause[m], inf.net.mode_strength[m]
        q, q0 = inf.q_sig[i, k], inf.q0_sig[k]
        if_on, if_off = ((1 - q0 * q), (1 - q0)) if present else ((q0 * q) ** inf.w, q0 ** inf.w)
        on, off = s * joint.mode_on[m] / if_on, (1 - s) * joint.mode_off[m] / if_off
        r = on / (on + off)
        lr = np.ones_like(post)
        lr[i] = (r * if_on + (1 - r) * if_off) / if_off
        odds = post / np.maximum(1 - post, 1e-300) / lr
        return odds / (1 + odds)

    def _hypothesis(self, i, joint, observations, loo, mech_given) -> Hypothesis:
        kb, net = self.kb, self.net
        rc = kb.root_causes[net.causes[i]]
        chain = self._chain(rc, observations, mech_given)
        return Hypothesis(
            id=rc.id, title=rc.title, probability=float(joint.cause_post[i]), bottlenecks=list(rc.bottlenecks),
            layer=rc.layer, description=rc.description, chain=chain,
            evidence=self._evidence(i, joint, observations, loo),
            localization=self._localization(rc, chain),
            remedies=[self._remedy(r) for r in rc.remedies])

    def _chain(self, rc, observations, mech_given):
        """Paths cause -> mechanism -> observed finding (and cause -> signature finding) that are present.

        mech_given[j] is P(mechanism j on | evidence, this cause on); mechanisms below 0.5 are left out.
        """
        paths = []
        for eff in sorted(rc.mechanisms, key=lambda e: -e.strength):
            mech = self.kb.mechanisms[eff.target]
            j = self.net.mechanisms.index(mech.id)
            seen = [self._finding_step(e.target, observations) for e in mech.effects
                    if e.target in observations and observations[e.target].present]
            if seen and mech_given[j] >= CHAIN_MIN_PROBABILITY:
                paths.append({"mechanism": mech.id, "title": mech.title, "strength": eff.strength,
                              "probability": round(float(mech_given[j]), 4), "findings": seen})
        modes = {m.id: m for m in rc.modes}
        groups = {}
        for e in rc.signatures:
            if e.target in observations and observations[e.target].present:
                groups.setdefault(e.mode, []).append(self._finding_step(e.target, observations))
        for mode, sigs in groups.items():
            title = modes[mode].title if mode else "direct signature"
            paths.append({"mechanism": None, "title": title, "strength": modes[mode].strength if mode else None,
                          "probability": None, "findings": sigs})
        return paths

    def _finding_step(self, fid, observations):
        obs = observations[fid]
        return {"id": fid, "title": self.kb.findings[fid].title, "observed": obs.detail, "entities": obs.entities}

    def _evidence(self, i, joint, observations, loo):
        p = float(joint.cause_post[i])
        shifts = []
        for f, without in loo.items():
            delta = p - float(without[i])
            if abs(delta) >= MIN_EVIDENCE_SHIFT:
                obs = observations[f]
                shifts.append({"finding": f, "present": obs.present, "observed": obs.detail,
                               "shift": round(delta, 4)})
        shifts.sort(key=lambda s: -abs(s["shift"]))
        return {"for": [s for s in shifts if s["shift"] > 0], "against": [s for s in shifts if s["shift"] < 0]}

    def _localization(self, rc, chain):
        entities = {}
        for path in chain:
            for step in path["findings"]:
                for e in step["entities"]:
                    entities.setdefault(e, []).append(step["id"])
        if entities:
            text = "; ".join(f"{e} ({', '.join(sorted(set(fs)))})" for e, fs in entities.items())
            return {"kind": rc.localizes_to, "entities": list(entities), "text": text}
        where = "the whole service" if rc.localizes_to == "service" else \
            f"not localized: compare every {rc.localizes_to} against its peers"
        return {"kind": rc.localizes_to, "entities": [], "text": where}

    def _remedy(self, rid):
        tech = self.kb.technologies[rid]
        return {"id": tech.id, "title": tech.title, "kind": tech.kind, "relieves": list(tech.relieves),
                "can_worsen": list(tech.can_worsen), "cannot_fix": list(tech.cannot_fix),
                "counterexample": tech.counterexample, "retest": list(tech.retest)}
