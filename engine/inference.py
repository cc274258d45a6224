"""Exact posterior inference for the three-layer noisy-OR network, without pgmpy.

Method
------
1. Enumerate the joint state S of the mechanisms (2^n states, n <= 16 by `kb check`).
2. Root causes are independent a priori and every mechanism is a noisy-OR of causes, so
   zeta(S) = P(no mechanism outside S is on, signature evidence) factorizes over causes:
   prod_i [(1 - p_i) u_i + p_i v_i A_i(S)], where A_i(S) = P(cause i turns on nothing outside S).
   Evidence on signature findings (cause-level findings) enters as the per-cause weights u_i, v_i;
   a present finding with several cause parents is expanded by inclusion-exclusion. Findings of a
   cause-private mode (P(mode | cause on) = s, off with the cause) fold into that cause's weights as
   u_i *= P(e | mode off), v_i *= s P(e | mode on) + (1 - s) P(e | mode off): exact, nothing enumerated.
   Change findings are a cause-private choice (a cause names one change, P(names k) = c_ik): unlisted
   changes give v_i *= 1 - sum over unlisted k of c_ik (= r_i); listed changes are expanded by
   inclusion-exclusion like the findings above, a subset T of them contributing per cause
   (r_i - sum over k in T of c_ik) / r_i, the chance it named none of T given it named no unlisted one.
3. A Moebius transform over the subset lattice turns zeta into P(S, evidence), and the same for
   P(cause i on, S, evidence) for every i at once.
4. Mechanism findings depend on S only: their likelihood L(S) is a product of precomputed columns.
5. P(cause i | evidence) = sum_S J_i(S) L(S) / sum_S D(S) L(S).
An absent finding's likelihood is raised to `absent_weight` (< 1 tempers it): an observed absence is weaker
evidence than a presence (a threshold just missed, a value read from an averaged dashboard, a symptom that
comes and goes). P(off | ...)^w is still a product over parents, so every step above stays exact. A yes/no
fact of the deployment (a gateway in front, RDMA adapters, disaggregation) is not a measurement: its absence
counts in full.
Exact up to floating point; `tests/test_inference.py` checks it against brute force and pgmpy.
"""
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from perfdoctor.engine.network import NoisyOrNetwork

MAX_MECHANISMS = 16


@dataclass
class Joint:
    """Everything the ranking, explanations and probe selection need from one inference."""
    evidence: dict
    D: np.ndarray          # (2^n,) P(S, signature evidence)
    J: np.ndarray          # (2^n, n_causes) P(cause on, S, signature evidence)
    L: np.ndarray          # (2^n,) P(mechanism-finding evidence | S)
    evidence_prob: float   # P(all evidence)
    cause_post: np.ndarray  # (n_causes,)
    mech_post: np.ndarray   # (n_mech,)
    mode_on: np.ndarray     # (n_modes,) P(evidence on the mode's findings | mode on)
    mode_off: np.ndarray    # (n_modes,) the same with the mode off

    def mode_given_cause(self, strength: np.ndarray) -> np.ndarray:
        """P(mode on | its cause on, evidence) for every mode."""
        on = strength * self.mode_on
        return on / (on + (1 - strength) * self.mode_off)


class ExactInference:
    """Precomputes evidence-independent tables once (cold start); `query` is the warm path."""

    def __init__(self, net: NoisyOrNetwork, absent_weight: float = 1.0):
        n = len(net.mechanisms)
        if n > MAX_MECHANISMS:
            raise ValueError(f"{n} mechanisms: exact inference supports at most {MAX_MECHANISMS}")
        self.net, self.n, self.w = net, n, absent_weight
        states = np.arange(2 ** n)
        self.bits = ((states[:, None] >> (n - 1 - np.arange(n))) & 1).astype(float)
        off = 1.0 - self.bits
        self.A = np.exp(off @ np.log1p(-net.cause_mech).T)                     # (2^n, n_causes)
        self.leak_off = np.exp(off @ np.log1p(-net.mech_leak))                 # (2^n,)
        self.P0 = np.exp(self.bits @ np.log1p(-net.mech_finding) + np.log1p(-net.mech_finding_leak))  # P(f off | S)
        self.mech_index = {f: k for k, f in enumerate(net.mech_findings)}
        self.sig_index = {f: k for k, f in enumerate(net.sig_findings)}
        self.q_sig = 1.0 - net.cause_sig                                      # (n_causes, n_sf)
        self.q0_sig = 1.0 - net.sig_leak
        self.sig_parents = [np.nonzero(net.cause_sig[:, k])[0] for k in range(len(net.sig_findings))]
        self.is_change = net.sig_change if len(net.sig_change) else np.zeros(len(net.sig_findings), bool)
        stated = net.sig_stated if len(net.sig_stated) else np.zeros(len(net.sig_findings), bool)
        self.w_sig = np.where(stated, 1.0, absent_weight)                      # (n_sf,) weight of an absence

    def likelihood(self, evidence: dict) -> np.ndarray:
        """L(S) over the mechanism findings in `evidence`."""
        L = np.ones(2 ** self.n)
        for f, present in evidence.items():
            k = self.mech_index.get(f)
            if k is not None:
                L *= (1.0 - self.P0[:, k]) if present else self.P0[:, k] ** self.w
        return L

    def query(self, evidence: dict, prior: np.ndarray | None = None) -> Joint:
        """Posterior of every root cause and mechanism given {finding: present}; unknown ids are ignored.

        `prior` replaces the network's cause priors for this query (context-dependent scope).
        """
        mode_on, mode_off = self.mode_likelihoods(evidence)
        D, J = self._cause_side(evidence, self.net.prior if prior is None else prior, mode_on, mode_off)
        L = self.likelihood(evidence)
        pe = float(D @ L)
        if not pe > 0:
            raise ValueError("evidence has zero probability under the model")
        DL = D * L
        return Joint(evidence, D, J, L, pe, (J.T @ L) / pe, (DL @ self.bits) / pe, mode_on, mode_off)

    def mode_of(self, k: int) -> int:
        """Mode index of signature finding k, or -1."""
        return int(self.net.sig_mode[k]) if len(self.net.sig_mode) else -1

    def mode_likelihoods(self, evidence: dict) -> tuple[np.ndarray, np.ndarray]:
        """Per mode, P(evidence on its findings | mode on) and (| mode off): its findings have no other parent."""
        on, off = np.ones(len(self.net.modes)), np.ones(len(self.net.modes))
        for f, present in evidence.items():
            k = self.sig_index.get(f)
            if k is None or (m := self.mode_of(k)) < 0:
                continue
            q, q0 = self.q_sig[self.net.mode_cause[m], k], self.q0_sig[k]
            on[m] *= (1.0 - q0 * q) if present else (q0 * q) ** self.w_sig[k]
            off[m] *= (1.0 - q0) if present else q0 ** self.w_sig[k]
        return on, off

    def _cause_side(self, evidence, p, mode_on, mode_off):
        """D(S) and J_i(S) with all signature evidence folded in (steps 2 and 3)."""
        u = np.ones_like(p)      # weight of "cause off"
        v = np.ones_like(p)      # weight of "cause on"
        for m, i in enumerate(self.net.mode_cause):   # a mode is off while its cause is off
            s = self.net.mode_strength[m]
            u[i] *= mode_off[m]
            v[i] *= s * mode_on[m] + (1 - s) * mode_off[m]
        const = 1.0
        named = self.net.cause_sig
        unlisted = [self.sig_index[f] for f, present in evidence.items()
                    if not present and f in self.sig_index and self.is_change[self.sig_index[f]]]
        # a cause names one change: it named none of the unlisted ones (each listed one is then expanded below)
        not_unlisted = 1.0 - named[:, unlisted].sum(axis=1)
        v = v * not_unlisted ** self.w
        expand = []              # present signature findings with several parents, and every listed change
        for f, present in evidence.items():
            k = self.sig_index.get(f)
            if k is None or self.mode_of(k) >= 0:
                continue
            parents = self.sig_parents[k]
            q, q0 = self.q_sig[:, k], self.q0_sig[k]
            if not present:
                const *= q0 ** self.w_sig[k]
                if not self.is_change[k]:
                    v = v * q ** self.w_sig[k]
            elif len(parents) == 1 and not self.is_change[k]:
                i = parents[0]
                u[i] *= 1.0 - q0
                v[i] *= 1.0 - q0 * q[i]
            else:
                expand.append(k)
        zD = np.zeros(2 ** self.n)
        zJ = np.zeros((2 ** self.n, len(p)))
        for size in range(len(expand) + 1):
            for subset in combinations(expand, size):
                idx = [k for k in subset if not self.is_change[k]]
                listed = [k for k in subset if self.is_change[k]]
                v_t = v * np.prod(self.q_sig[:, idx], axis=1) if idx else v
                if listed:   # P(the cause named none of these either | it named no unlisted one)
                    v_t = v_t * (not_unlisted - named[:, listed].sum(axis=1)) / np.maximum(not_unlisted, 1e-300)
                c_t = const * (-1) ** size * float(np.prod(self.q0_sig[list(subset)])) if subset else const
                on = (p * v_t)[None, :] * self.A
                factor = ((1.0 - p) * u)[None, :] + on
                total = np.prod(factor, axis=1) * self.leak_off * c_t
                zD += total
                zJ += total[:, None] * (on / factor)
        return np.maximum(self._moebius(zD), 0.0), np.maximum(self._moebius(zJ), 0.0)

    def _moebius(self, z):
        """Inverse of the subset-sum (zeta) transform along each mechanism bit."""
        y = z.reshape((2,) * self.n + z.shape[1:]).copy()
        for axis in range(self.n):
            hi = [slice(None)] * y.ndim
            lo = list(hi)
            hi[axis], lo[axis] = 1, 0
            y[tuple(hi)] -= y[tuple(lo)]
        return y.reshape(z.shape)
