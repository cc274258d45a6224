"""The Bayesian network: root causes -> mechanisms -> findings with noisy-OR CPDs, compiled from the KB.

Two views of one model: `NoisyOrNetwork` holds the arrays perfdoctor's own exact inference uses
(built at cold start, no pgmpy import), and `to_pgmpy` builds the same network as a pgmpy
DiscreteBayesianNetwork for checking and for users who want pgmpy's tools.
"""
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from perfdoctor.kb.loader import CHANGE_PREFIX, KB

OFF, ON = "off", "on"


@dataclass
class NoisyOrNetwork:
    """Parameters of the three-layer noisy-OR network.

    P(cause on) = prior. P(mechanism on | causes) = 1 - (1 - leak) * prod over active causes of (1 - s).
    Mechanism findings have mechanism parents only; signature findings have root-cause parents only
    (`kb check` enforces this split, the inference relies on it). A moded signature finding has one
    parent, a cause-private mode: P(mode on | cause on) = mode_strength, off when the cause is off.
    Change findings (what changed before the regression) are alternatives: a cause names one change.
    Each cause has a private choice among its change findings, P(it names change k | cause on) =
    cause_sig[i, k], summing to at most 1; change k is listed when a cause named it, or by its leak.
    """
    causes: list[str]
    prior: np.ndarray            # (n_causes,)
    mechanisms: list[str]
    mech_leak: np.ndarray        # (n_mech,)
    cause_mech: np.ndarray       # (n_causes, n_mech) strengths, 0 = no edge
    mech_findings: list[str]
    mech_finding_leak: np.ndarray  # (n_mf,)
    mech_finding: np.ndarray     # (n_mech, n_mf) strengths
    sig_findings: list[str]
    sig_leak: np.ndarray         # (n_sf,)
    cause_sig: np.ndarray        # (n_causes, n_sf) strengths; for a moded finding, P(finding | its mode)
    modes: list[str] = field(default_factory=list)                        # "cause/mode"
    mode_cause: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # (n_modes,) owning cause
    mode_strength: np.ndarray = field(default_factory=lambda: np.zeros(0))    # (n_modes,) P(mode | cause)
    sig_mode: np.ndarray = field(default_factory=lambda: np.zeros(0, int))    # (n_sf,) mode index or -1
    sig_change: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # (n_sf,) a change finding
    sig_stated: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # (n_sf,) a yes/no fact of the context

    @property
    def findings(self) -> list[str]:
        return self.mech_findings + self.sig_findings


def compile_network(kb: KB) -> NoisyOrNetwork:
    """Arrays from the KB; findings no edge reaches are left out (they carry no evidence)."""
    causes = sorted(kb.root_causes)
    mechs = sorted(kb.mechanisms)
    mech_targets = sorted({e.target for m in kb.mechanisms.values() for e in m.effects})
    sig_targets = sorted({e.target for rc in kb.root_causes.values() for e in rc.signatures})
    ci, mi = {c: i for i, c in enumerate(causes)}, {m: i for i, m in enumerate(mechs)}
    mfi, sfi = {f: i for i, f in enumerate(mech_targets)}, {f: i for i, f in enumerate(sig_targets)}
    cause_mech = np.zeros((len(causes), len(mechs)))
    cause_sig = np.zeros((len(causes), len(sig_targets)))
    mech_finding = np.zeros((len(mechs), len(mech_targets)))
    for rc in kb.root_causes.values():
        for e in rc.mechanisms:
            cause_mech[ci[rc.id], mi[e.target]] = e.strength
        for e in rc.signatures:
            cause_sig[ci[rc.id], sfi[e.target]] = e.strength
    for m in kb.mechanisms.values():
        for e in m.effects:
            mech_finding[mi[m.id], mfi[e.target]] = e.strength
    sig_change = np.array([f.startswith(CHANGE_PREFIX) for f in sig_targets], dtype=bool)
    stated = {f.id for s in kb.signals.values() if (s.from_context and s.kind == "bool") or s.controlled_test
              for f in s.findings}
    sig_stated = np.array([f in stated for f in sig_targets], dtype=bool)
    cause_sig[:, sig_change] = change_choice(cause_sig[:, sig_change])
    modes, mode_cause, mode_strength = [], [], []
    sig_mode = np.full(len(sig_targets), -1)
    for c in causes:
        rc = kb.root_causes[c]
        index = {}
        for m in rc.modes:
            index[m.id] = len(modes)
            modes.append(f"{c}/{m.id}")
            mode_cause.append(ci[c])
            mode_strength.append(m.strength)
        for e in rc.signatures:
            if e.mode is not None:
                sig_mode[sfi[e.target]] = index[e.mode]
    return NoisyOrNetwork(
        causes=causes, prior=np.array([kb.root_causes[c].prior for c in causes]),
        mechanisms=mechs, mech_leak=np.array([kb.mechanisms[m].leak for m in mechs]), cause_mech=cause_mech,
        mech_findings=mech_targets, mech_finding_leak=np.array([kb.findings[f].leak for f in mech_targets]),
        mech_finding=mech_finding,
        sig_findings=sig_targets, sig_leak=np.array([kb.findings[f].leak for f in sig_targets]), cause_sig=cause_sig,
        modes=modes, mode_cause=np.array(mode_cause, dtype=int), mode_strength=np.array(mode_strength),
        sig_mode=sig_mode, sig_change=sig_change, sig_stated=sig_stated)


def change_choice(strengths: np.ndarray) -> np.ndarray:
    """P(a cause names change k) from the KB's per-change strengths, one row per cause.

    The KB gives each kind of change its own strength; read as independent, a version regression that
    lists "engine upgrade" would count every unlisted kind (driver, CUDA, NCCL, ...) against itself.
    A cause names one change: P(it names any) = 1 - prod(1 - s) keeps what the strengths say together,
    and that is split over the kinds in proportion to their strengths.
    """
    total = strengths.sum(axis=1, keepdims=True)
    named = 1 - np.prod(1 - strengths, axis=1, keepdims=True)
    return np.where(total > 0, strengths * named / np.maximum(total, 1e-300), 0.0)


def _noisy_or_cpd(TabularCPD, var, parents, strengths, leak):
    """Full table of a leaky noisy-OR, states named explicitly (pgmpy's NoisyORCPD has no leak)."""
    n = len(parents)
    cols = []
    for idx in range(2 ** n):
        bits = [(idx >> (n - 1 - k)) & 1 for k in range(n)]   # pgmpy: first parent varies slowest
        q = (1 - leak) * np.prod([(1 - s) if b else 1.0 for s, b in zip(strengths, bits)])
        cols.append((q, 1 - q))
    values = np.array(cols).T if cols else np.array([[1 - leak], [leak]])
    return TabularCPD(var, 2, values.reshape(2, -1), evidence=parents or None,
                      evidence_card=[2] * n or None,
                      state_names={var: [OFF, ON], **{p: [OFF, ON] for p in parents}})


def to_pgmpy(net: NoisyOrNetwork):
    """The same network as a pgmpy DiscreteBayesianNetwork (imports pgmpy: slow, so only on demand)."""
    from pgmpy.factors.discrete import TabularCPD
    from pgmpy.models import DiscreteBayesianNetwork

    model = DiscreteBayesianNetwork()
    cpds = []
    for i, c in enumerate(net.causes):
        model.add_node(c)
        cpds.append(TabularCPD(c, 2, [[1 - net.prior[i]], [net.prior[i]]], state_names={c: [OFF, ON]}))
    def add(child, names, strengths, leak):
        model.add_node(child)
        model.add_edges_from((p, child) for p in names)
        cpds.append(_noisy_or_cpd(TabularCPD, child, names, list(strengths), leak))

    for m, mode in enumerate(net.modes):
        add(mode, [net.causes[net.mode_cause[m]]], [net.mode_strength[m]], 0.0)
    change = net.sig_change if len(net.sig_change) else np.zeros(len(net.sig_findings), bool)
    choices = {}   # cause index -> (choice node, its states): "none" or the change finding it names
    for i, c in enumerate(net.causes):
        ks = [k for k in np.nonzero(change)[0] if net.cause_sig[i, k] > 0]
        if ks:
            states = ["none"] + [net.sig_findings[k] for k in ks]
            p = net.cause_sig[i, ks]
            values = np.array([[1.0] + [0.0] * len(ks), [1 - p.sum(), *p]]).T   # columns: cause off, on
            node = f"{c}/change"
            model.add_node(node)
            model.add_edge(c, node)
            cpds.append(TabularCPD(node, len(states), values, evidence=[c], evidence_card=[2],
                                   state_names={node: states, c: [OFF, ON]}))
            choices[i] = (node, states)
    for k in np.nonzero(change)[0]:
        f = net.sig_findings[k]
        parents = [choices[i] for i in np.nonzero(net.cause_sig[:, k])[0]]
        model.add_node(f)
        model.add_edges_from((node, f) for node, _ in parents)
        cols = []
        for picks in product(*[states for _, states in parents]):   # pgmpy: first parent varies slowest
            off = 0.0 if f in picks else 1 - net.sig_leak[k]
            cols.append((off, 1 - off))
        cpds.append(TabularCPD(f, 2, np.array(cols).T, evidence=[n for n, _ in parents] or None,
                               evidence_card=[len(st) for _, st in parents] or None,
                               state_names={f: [OFF, ON], **{n: st for n, st in parents}}))
    layers = [(net.mechanisms, net.causes, net.cause_mech, net.mech_leak),
              (net.mech_findings, net.mechanisms, net.mech_finding, net.mech_finding_leak),
              (net.sig_findings, net.causes, net.cause_sig, net.sig_leak)]
    for layer, (children, parents, strengths, leaks) in enumerate(layers):
        for k, child in enumerate(children):
            rows = np.nonzero(strengths[:, k])[0]
            if layer == 2 and change[k]:
                continue
            if layer == 2 and len(net.sig_mode) and net.sig_mode[k] >= 0:
                add(child, [net.modes[net.sig_mode[k]]], strengths[rows, k], leaks[k])
            else:
                add(child, [parents[r] for r in rows], strengths[rows, k], leaks[k])
    model.add_cpds(*cpds)
    model.check_model()
    return model
