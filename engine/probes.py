"""Next probes ranked by expected information gain about the root causes, per minute of work."""
from dataclasses import dataclass
from itertools import product

import numpy as np

from perfdoctor.engine.inference import ExactInference, Joint
from perfdoctor.kb.loader import KB, change_finding_id

MAX_MECH_FINDINGS = 4     # outcome combinations grow as 2^k: keep the most informative findings
MAX_SIG_FINDINGS = 8
HANDOFF_MIN = 5.0         # every probe also costs a hand-off: find who has access, run it, paste the output back


@dataclass
class ProbeSuggestion:
    id: str
    title: str
    signals: list[str]
    command: str
    promql: str | None
    cost: float
    disruptive: bool
    gain_bits: float

    @property
    def score(self) -> float:
        """Expected bits per minute, counting the probe's own minutes plus the hand-off every probe costs."""
        return self.gain_bits / (self.cost + HANDOFF_MIN)


def probe_findings(kb: KB, inf: ExactInference, signals: list[str], gated: dict[str, list[str]] | None = None) -> list[str]:
    """Network findings that measuring `signals` would reveal (their own, and those a `when:` gates on them)."""
    gated = gated if gated is not None else findings_gated_on(kb)
    out = []
    for sid in signals:
        fids = [change_finding_id(c) for c in kb.changes] if sid == "changes" else \
            [f.id for f in kb.signals[sid].findings]
        fids += gated.get(sid, [])
        out += [f for f in fids if (f in inf.mech_index or f in inf.sig_index) and f not in out]
    return out


def findings_gated_on(kb: KB) -> dict[str, list[str]]:
    """For each signal, the findings of other signals whose `when:` condition reads it."""
    gated: dict[str, list[str]] = {}
    for s in kb.signals.values():
        for f in s.findings:
            for sid in dict.fromkeys(c.signal for c in f.rule.conditions):
                gated.setdefault(sid, []).append(f.id)
    return gated


def rank_probes(kb: KB, inf: ExactInference, joint: Joint, known: set[str],
                workload: str | None = None) -> list[ProbeSuggestion]:
    """Probes with unmeasured signals, best expected gain per minute first.

    Notes
    -----
    1. A probe is a candidate when at least one signal it fills is not yet known and it applies to the
       workload (no vLLM metrics for a training job).
    2. Its outcome is the joint present/absent state of the findings those signals would give.
    3. Gain = sum over root causes of the mutual information I(cause; outcome | evidence), in bits:
       several causes can be active, so each cause's own uncertainty counts.
    4. Mechanism findings are handled exactly (through the enumerated mechanism states); cause-level
       signature findings use the current posterior of their other parent causes (mean field).
    5. Score = gain / (cost + HANDOFF_MIN) in minutes: a 1-minute probe is not five times cheaper than a
       5-minute one once someone has to run it and paste the output; disruptive probes are marked, not penalised.
    """
    view = _support(inf, joint)
    gated = findings_gated_on(kb)
    out = []
    for probe in kb.probes.values():
        if workload and workload not in probe.workloads:
            continue
        unknown = [s for s in probe.fills if s not in known]
        if not unknown:
            continue
        findings = [f for f in probe_findings(kb, inf, unknown, gated) if f not in joint.evidence]
        gain = expected_gain(inf, joint, findings, view) if findings else 0.0
        out.append(ProbeSuggestion(probe.id, probe.title, unknown, probe.command, probe.promql,
                                   probe.cost_min, probe.disruptive, gain))
    out.sort(key=lambda p: (-p.score, p.cost, p.id))
    return out


@dataclass
class _View:
    """The mechanism states that carry the posterior mass, with the rows of each table restricted to them."""
    J: np.ndarray
    D: np.ndarray
    L: np.ndarray
    P0: np.ndarray


SUPPORT_MASS = 1 - 1e-9


def _support(inf: ExactInference, joint: Joint) -> _View:
    """Drop states holding a 1e-9 share of P(S, evidence): every P(cause, outcome) moves by at most that."""
    w = joint.D * joint.L
    order = np.argsort(-w)
    keep = order[: int(np.searchsorted(np.cumsum(w[order]), SUPPORT_MASS * w.sum())) + 1]
    return _View(joint.J[keep], joint.D[keep], joint.L[keep], inf.P0[keep])


def expected_gain(inf: ExactInference, joint: Joint, findings: list[str], view: _View | None = None) -> float:
    view = view or _support(inf, joint)
    mech = [inf.mech_index[f] for f in findings if f in inf.mech_index]
    sig = [inf.sig_index[f] for f in findings if f in inf.sig_index]
    if len(mech) > MAX_MECH_FINDINGS:
        single = _single_mech_gains(joint, view, mech)
        mech = [mech[c] for c in np.argsort(-single, kind="stable")[:MAX_MECH_FINDINGS]]
    if len(sig) > MAX_SIG_FINDINGS:
        single = np.array([_gain(inf, joint, view, [], [k]) for k in sig])
        sig = [sig[c] for c in np.argsort(-single, kind="stable")[:MAX_SIG_FINDINGS]]
    return _gain(inf, joint, view, mech, sig)


def _single_mech_gains(joint, view, mech):
    """I(causes; finding) for each mechanism finding alone, all in one matrix product."""
    off = view.P0[:, mech]
    cols = view.L[:, None] * np.concatenate([off, 1 - off], axis=1)        # (states, 2k)
    on = (view.J.T @ cols) / joint.evidence_prob
    tot = (view.D @ cols) / joint.evidence_prob
    k = len(mech)
    gains = np.zeros(k)
    for c in range(k):
        pair_on, pair_tot = on[:, [c, c + k]], tot[[c, c + k]]
        gains[c] = _mutual_information(joint.cause_post, pair_on, np.maximum(pair_tot[None, :] - pair_on, 0.0))
    return gains


def _mutual_information(post, on, off):
    """sum over causes of I(cause; outcome) from P(cause on, o) and P(cause off, o), in bits."""
    p_out = on + off
    with np.errstate(divide="ignore", invalid="ignore"):
        term_on = np.where(on > 0, on * np.log2(on / (post[:, None] * p_out)), 0.0)
        term_off = np.where(off > 0, off * np.log2(off / ((1 - post)[:, None] * p_out)), 0.0)
    return float(max(np.nansum(term_on + term_off), 0.0))


def _gain(inf, joint, view, mech, sig):
    pe, post = joint.evidence_prob, joint.cause_post
    # mechanism findings: exact joint of (cause i on, outcome) through the enumerated states
    outcomes = np.array(list(product((0, 1), repeat=len(mech))), dtype=bool).reshape(2 ** len(mech), len(mech))
    cols = np.repeat(view.L[:, None], len(outcomes), axis=1)
    for col, k in enumerate(mech):
        off = view.P0[:, k]
        cols *= np.where(outcomes[:, col][None, :], (1 - off)[:, None], off[:, None])
    on_m = (view.J.T @ cols) / pe                                # (n_causes, n_outcomes)
    off_m = np.maximum((view.D @ cols) / pe - on_m, 0.0)
    # signature findings: mean field over the other parent causes
    if sig:
        q = _effective_q(inf, joint, sig)                        # (n_causes, k)
        q0 = inf.q0_sig[sig]
        keep = 1 - post[:, None] * (1 - q)                       # E[q^C_i] per cause
        rest = np.prod(keep, axis=0)[None, :] / keep             # other causes
        f_off_on = q0[None, :] * q * rest                        # P(f off | cause i on)
        f_off_off = q0[None, :] * rest                           # P(f off | cause i off)
        sig_out = np.array(list(product((0, 1), repeat=len(sig))), dtype=bool).reshape(2 ** len(sig), len(sig))
        p_on = np.prod(np.where(sig_out[None], 1 - f_off_on[:, None, :], f_off_on[:, None, :]), axis=2)
        p_off = np.prod(np.where(sig_out[None], 1 - f_off_off[:, None, :], f_off_off[:, None, :]), axis=2)
        on_m = (on_m[:, :, None] * p_on[:, None, :]).reshape(len(post), -1)
        off_m = (off_m[:, :, None] * p_off[:, None, :]).reshape(len(post), -1)
    return _mutual_information(post, on_m, off_m)


def _effective_q(inf, joint, sig):
    """P(f off | cause on) / P(f off | cause off) per cause; a moded finding goes through its mode's posterior."""
    q = inf.q_sig[:, sig].copy()
    if not len(inf.net.modes):
        return q
    given = joint.mode_given_cause(inf.net.mode_strength)
    for col, k in enumerate(sig):
        m = inf.mode_of(k)
        if m >= 0:
            i = inf.net.mode_cause[m]
            q[i, col] = 1 - given[m] * (1 - q[i, col])
    return q
