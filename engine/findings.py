"""Turn a snapshot's signal values into present / absent findings, with the values and entities behind them."""
import math
from dataclasses import dataclass, field, replace
from statistics import mean, median

from perfdoctor.engine.peers import best_peer_shortfalls, robust_outliers
from perfdoctor.kb.loader import KB, change_finding_id
from perfdoctor.symptoms.snapshot import Snapshot


# Rules that compare the current value with the baseline; every other rule reads a state, and a state that
# held in the healthy baseline too says nothing about what changed.
BASELINE_RULES = {"ratio_up", "ratio_down", "tail_ratio_up", "differs_from_baseline", "left_baseline_value"}

# A ratio rule reads a change smaller than the threshold but larger than this share of it (in log space) as
# marginal: neither present nor absent. A 12 % drop against a 15 % threshold is weak evidence for the
# finding, not evidence that nothing moved.
MARGINAL_SHARE = 0.5

# A state read against a fixed bound is marginal the same way: a value short of the bound by less than this share
# of it (host CPU at 0.86 against 0.9), or a spread across peers above this share of its threshold, is too close
# to call, not evidence that the state is absent.
MARGINAL_BAND = 0.1

# Ratios of shares are read with this floor, so that a miss rate going from 0 (all prefix hits) to 40% is a
# rise (x40) rather than a ratio with no scale, and 0.1% -> 0.4% is not a fourfold one.
FRACTION_FLOOR = 0.01

# Where added time went is read only when the time grew by at least this share: on a 2% change, the shares'
# rounding decides the answer.
MIN_ADDED_SHARE_GROWTH = 0.1


@dataclass
class Observation:
    """One evaluated finding: present, absent or marginal (present None: too close to call), why, and where."""
    finding: str
    signal: str
    present: bool | None
    detail: str
    entities: list[str] = field(default_factory=list)


AGGREGATES = {"max": max, "min": min, "median": median, "mean": mean}


def evaluate(kb: KB, snap: Snapshot) -> dict[str, Observation]:
    """Evaluate every finding whose inputs are in the snapshot; the rest stay unknown (absent from the result)."""
    out = {}
    for sid, signal in kb.signals.items():
        if sid not in snap.current:
            continue
        for finding in signal.findings:
            obs = _evaluate(kb, snap, sid, signal, finding)
            if obs is not None and obs.present and sid in snap.baseline and finding.rule.kind not in BASELINE_RULES:
                before = _evaluate(kb, replace(snap, current=snap.baseline, baseline={}), sid, signal, finding)
                if before is not None and before.present:
                    obs = Observation(obs.finding, obs.signal, None,
                                      f"{obs.detail}; held in the baseline too, so not evidence of what changed")
            moot = sorted(set(finding.rule.unless_changed or []) & set(snap.changes or []))
            if obs is not None and moot:
                obs = Observation(obs.finding, obs.signal, None,
                                  f"{obs.detail}; not compared with the baseline: the reported change "
                                  f"{', '.join(moot)} explains the difference")
            if obs is not None:
                out[finding.id] = obs
    if snap.changes is not None:
        for cid in kb.changes:
            fid = change_finding_id(cid)
            present = cid in snap.changes
            out[fid] = Observation(fid, "changes", present, "reported" if present else "not among the reported changes")
    return out


def _evaluate(kb, snap, sid, signal, finding):
    if finding.rule.only_without_baseline and sid in snap.baseline:
        return None
    obs = _evaluate_rule(kb, snap, sid, signal, finding)
    for cond in finding.rule.conditions:
        if obs is None:
            break
        obs = _apply_condition(kb, snap, cond, obs)
    if obs is not None and obs.present is False and finding.rule.absent_unknown:
        obs = Observation(obs.finding, obs.signal, None, f"{obs.detail}; its absence is not counted (it does not rule "
                          "its causes out)")
    return obs


def _apply_condition(kb, snap, cond, obs):
    """A finding with `when` holds only while the other signal holds too; unknown while that one is unmeasured."""
    if cond.signal not in snap.current:
        return obs if cond.missing == "skip" else None
    value = AGGREGATES[cond.aggregate](_values(snap.current[cond.signal]).values())
    op, limit = (">", cond.above) if cond.above is not None else (">=", cond.at_least) if cond.at_least is not None \
        else ("<", cond.below)
    holds = {">": value > limit, ">=": value >= limit, "<": value < limit}[op]
    bound = f"{op} {limit:g}"
    shown = f"{cond.signal} {_fmt(value, kb.signals[cond.signal].unit)} ({cond.aggregate})"
    if isinstance(value, bool):   # a bool condition reads true as 1
        shown, bound = f"{cond.signal} is {str(value).lower()}", ""
    if not holds:
        detail = f"{obs.detail}; but {shown}" + (f" is not {bound}" if bound else "")
        return Observation(obs.finding, obs.signal, False if cond.otherwise == "absent" else None, detail)
    return Observation(obs.finding, obs.signal, obs.present, f"{obs.detail}; {shown} {bound}".rstrip(), obs.entities)


def _ratio(now, base):
    return now / base if base else (math.inf if now > 0 else 1.0)


def _values(v) -> dict:
    return v if isinstance(v, dict) else {"all": v}


def _fmt(x, unit=""):
    if isinstance(x, float):
        text = f"{x:.3g}"
    else:
        text = str(x)
    return f"{text} {unit}".strip() if unit and unit not in ("fraction", "bool", "string", "list", "count") else text


def _added_share(snap, sid, finding, rule, unit):
    """Where the added time went: the parts' share of (now - before), from the parts' shares in both states.
    Unknown unless the time is known in both states, every part now, and the time grew by at least
    MIN_ADDED_SHARE_GROWTH. A part missing from the baseline counts as 0 there, which bounds the share from above:
    enough to show the parts took too little of the added time (an `above` rule absent, a `below` rule present),
    never that they took much of it."""
    if any(n not in snap.current for n in [sid, *rule.parts]) or sid not in snap.baseline:
        return None
    now, before = (mean(_values(snap.current[sid]).values()), mean(_values(snap.baseline[sid]).values()))
    if before <= 0 or now < before * (1 + MIN_ADDED_SHARE_GROWTH):
        return None
    unknown_before = [p for p in rule.parts if p not in snap.baseline]
    share_now = sum(mean(_values(snap.current[p]).values()) for p in rule.parts)
    share_before = sum(mean(_values(snap.baseline[p]).values()) for p in rule.parts if p not in unknown_before)
    share = (now * share_now - before * share_before) / (now - before)
    present = share > rule.above if rule.above is not None else share < rule.below
    if unknown_before and present == (rule.above is not None):
        return None   # an upper bound that clears `above` or misses `below` proves nothing
    took = f"at most {share:.0%}" if unknown_before else f"{share:.0%}"
    detail = f"{' + '.join(rule.parts)} took {took} of the {_fmt(now - before, unit)} added to {sid} " \
             f"({_fmt(before, unit)} -> {_fmt(now, unit)})"
    if unknown_before:
        detail += f"; {', '.join(unknown_before)} unknown in the baseline, counted as 0"
    return Observation(finding.id, sid, present, detail)


def _evaluate_rule(kb, snap, sid, signal, finding):
    rule, cur = finding.rule, _values(snap.current[sid])
    kind, unit = rule.kind, signal.unit
    entity_named = isinstance(snap.current[sid], dict)
    if kind in ("above", "at_least", "below"):
        upper = kind != "below"
        agg = AGGREGATES[rule.aggregate or ("max" if upper else "min")]
        bound = getattr(rule, kind)
        holds = {"above": lambda v: v > bound, "at_least": lambda v: v >= bound, "below": lambda v: v < bound}[kind]
        value = agg(cur.values())
        hit = [e for e, v in cur.items() if holds(v)]
        present = holds(value)
        op = {"above": ">", "at_least": ">=", "below": "<"}[kind]
        detail = f"{sid} {_fmt(value, unit)} ({rule.aggregate or ('max' if upper else 'min')}) {op} {bound:g}" if present else \
                 f"{sid} {_fmt(value, unit)}, not {'above' if upper else 'below'} {bound:g}"
        near = bound * (1 - MARGINAL_BAND) < value < bound if upper else bound < value < bound * (1 + MARGINAL_BAND)
        if not present and bound > 0 and near:
            return Observation(finding.id, sid, None, detail + ", marginal")
        return Observation(finding.id, sid, present, detail, hit if entity_named and present else [])
    if kind in ("ratio_up", "ratio_down"):
        if sid not in snap.baseline:
            return None
        base_values = _values(snap.baseline[sid])
        label = sid
        if rule.complement:   # compare what is left: misses (1 - hit rate) are the prefill work still done
            cur, base_values = ({e: 1 - v for e, v in d.items()} for d in (cur, base_values))
            label = f"1 - {sid}"
        threshold = rule.ratio_up if kind == "ratio_up" else rule.ratio_down
        moved = lambda r: r >= threshold if kind == "ratio_up" else r <= threshold
        marginal = lambda r: 0 < r < math.inf and abs(math.log(r)) >= MARGINAL_SHARE * abs(math.log(threshold)) \
            and math.log(r) * math.log(threshold) > 0
        common = [e for e in cur if e in base_values and e != "all"] if entity_named else []
        common = [e for e in common if base_values[e] > 0]
        if common:  # the same entities before and after: compare each with itself
            ratios = {e: _ratio(cur[e], base_values[e]) for e in common}
            hit = [e for e in common if moved(ratios[e])]
            worst = max(common, key=lambda e: abs(math.log(ratios[e])) if 0 < ratios[e] < math.inf else math.inf)
            detail = f"{label} on {worst} {_fmt(base_values[worst], unit)} -> {_fmt(cur[worst], unit)} " \
                     f"(x{ratios[worst]:.2f}; {len(hit)} of {len(common)} moved)"
            if not hit and any(marginal(r) for r in ratios.values()):
                return Observation(finding.id, sid, None, detail + ", marginal")
            return Observation(finding.id, sid, bool(hit), detail, hit)
        now, base = mean(cur.values()), mean(base_values.values())
        if base <= 0 and now == base:   # zero before and after: nothing moved
            return Observation(finding.id, sid, False, f"{label} {_fmt(now, unit)} before and now")
        if base <= 0 and signal.kind != "fraction":   # a zero baseline has no scale: no ratio can be read from it
            return None
        if signal.kind == "fraction":   # a share has a natural resolution: below it, 0 and 0.2% are the same
            now, base = max(now, FRACTION_FLOOR), max(base, FRACTION_FLOOR)
        ratio = _ratio(now, base)
        detail = f"{label} {_fmt(base, unit)} -> {_fmt(now, unit)} (x{ratio:.2f})"
        if not moved(ratio) and marginal(ratio):
            return Observation(finding.id, sid, None, detail + ", marginal")
        return Observation(finding.id, sid, moved(ratio), detail)
    if kind == "over_slo":
        bound = (snap.context.get("slo") or {}).get(sid)
        if bound is None:
            return None
        value = max(cur.values())
        present = value > bound
        detail = f"{sid} {_fmt(value, unit)} {'>' if present else '<='} SLO {bound:g} {unit}"
        return Observation(finding.id, sid, present, detail, [e for e, v in cur.items() if v > bound] if entity_named and present else [])
    if kind == "outlier":
        if not entity_named:
            return None
        o = rule.outlier
        if len(cur) < o.min_peers:
            return None
        if o.reference == "best":
            flagged = best_peer_shortfalls(cur, o.direction, o.min_rel)
            ref, ref_name = (max if o.direction == "low" else min)(cur.values()), "best peer"
        else:
            flagged = robust_outliers(cur, o.direction, o.min_z, o.min_rel, o.min_peers)
            ref, ref_name = median(cur.values()), "peer median"
        if flagged:
            worst = sorted(flagged, key=flagged.get, reverse=True)
            shown = ", ".join(f"{e}={_fmt(cur[e], unit)}" for e in worst[:5]) + (" ..." if len(worst) > 5 else "")
            detail = f"{sid} {o.direction} outlier vs {ref_name} {_fmt(ref, unit)}: {shown} ({len(worst)} of {len(cur)})"
        else:
            detail = f"{sid}: no {o.direction} outlier among {len(cur)} ({ref_name} {_fmt(ref, unit)})"
        return Observation(finding.id, sid, bool(flagged), detail, sorted(flagged, key=flagged.get, reverse=True))
    if kind == "spread_above":
        if not entity_named or len(cur) < 2:
            return None
        hi, lo = max(cur, key=cur.get), min(cur, key=cur.get)
        spread = (cur[hi] - cur[lo]) / cur[hi] if cur[hi] > 0 else 0.0
        present = spread >= rule.spread_above
        detail = f"{sid} from {_fmt(cur[lo], unit)} ({lo}) to {_fmt(cur[hi], unit)} ({hi}) across {len(cur)}"
        if not present and spread >= MARGINAL_SHARE * rule.spread_above:
            return Observation(finding.id, sid, None, detail + f" (spread {spread:.0%}), marginal")
        low = [e for e, v in cur.items() if v <= cur[lo] + 0.25 * (cur[hi] - cur[lo])]
        high = [e for e, v in cur.items() if v >= cur[hi] - 0.25 * (cur[hi] - cur[lo])]
        return Observation(finding.id, sid, present, detail, (high if len(high) <= len(low) else low) if present else [])
    if kind == "parts_share":
        rule_parts = rule.parts_share.parts
        if any(part not in snap.current for part in rule_parts):
            return None
        whole = mean(cur.values())
        parts = sum(mean(_values(snap.current[part]).values()) for part in rule_parts)
        if whole <= 0:
            return None
        share = parts / whole
        detail = f"{' + '.join(rule_parts)} = {share:.0%} of {sid} {_fmt(whole, unit)}"
        return Observation(finding.id, sid, share < rule.parts_share.below, detail)
    if kind == "added_share":
        return _added_share(snap, sid, finding, rule.added_share, unit)
    if kind == "differs_from_baseline":
        if sid not in snap.baseline:
            return None
        base_values = _values(snap.baseline[sid])
        common = [e for e in cur if e in base_values]
        if common:
            present = any(str(cur[e]) != str(base_values[e]) for e in common)
        else:
            present = {str(v) for v in cur.values()} != {str(v) for v in base_values.values()}
        before = {str(v) for v in base_values.values()}
        now = {str(v) for v in cur.values()}
        detail = f"{sid} {', '.join(sorted(before))} -> {', '.join(sorted(now))}" if present else f"{sid} unchanged"
        return Observation(finding.id, sid, present, detail)
    if kind == "left_baseline_value":
        if sid not in snap.baseline:
            return None
        value = rule.left_baseline_value
        base_values = _values(snap.baseline[sid])
        shows = lambda v: value in map(str, v) if isinstance(v, list) else str(v) == value   # noqa: E731
        common = [e for e in cur if e in base_values]
        if common:
            lost = [e for e in common if shows(base_values[e]) and not shows(cur[e])]
        else:
            lost = ["all"] if any(map(shows, base_values.values())) and not any(map(shows, cur.values())) else []
        present = bool(lost)
        now = ", ".join(sorted({str(v) for v in cur.values()}))
        detail = f"{sid} was {value} in the baseline, now {now}" if present else f"{sid}: {value} not lost"
        return Observation(finding.id, sid, present, detail, lost if entity_named and common else [])
    if kind == "equals":
        hit = [e for e, v in cur.items() if v == rule.equals]
        present = bool(hit)
        detail = f"{sid} = {rule.equals} on {', '.join(hit) if entity_named else 'the service'}" if present \
            else f"{sid} is {', '.join(sorted({str(v) for v in cur.values()}))}"
        return Observation(finding.id, sid, present, detail, hit if entity_named else [])
    if kind == "contains_any":
        wanted = set(rule.contains_any)
        hit = [e for e, v in cur.items() if wanted & set(v)]
        present = bool(hit)
        seen = sorted({r for v in cur.values() for r in v} & wanted)
        detail = f"{sid} includes {', '.join(seen)}" + (f" on {', '.join(hit)}" if entity_named else "") if present \
            else f"{sid}: none of {', '.join(sorted(wanted))}"
        return Observation(finding.id, sid, present, detail, hit if entity_named else [])
    if kind in ("fraction_of", "plus"):
        f = getattr(rule, kind)
        other = snap.current.get(f.signal)
        if other is None:
            return None
        other = _values(other)
        if "all" in other and len(other) == 1:
            pairs = {e: (v, other["all"]) for e, v in cur.items()}
        else:
            pairs = {e: (v, other[e]) for e, v in cur.items() if e in other}
        if kind == "plus":
            values = {e: v + o for e, (v, o) in pairs.items()}
        else:
            values = {e: v / o for e, (v, o) in pairs.items() if o}
        if not values:
            return None
        hit = [e for e, r in values.items() if (r >= f.above if f.above is not None else r < f.below)]
        top = (max if f.above is not None else min)(values, key=values.get)
        op = "+" if kind == "plus" else "/"
        detail = f"{sid}{op}{f.signal} {'up' if f.above is not None else 'down'} to {values[top]:.2f}" + \
            (f" on {top}" if entity_named else "")
        return Observation(finding.id, sid, bool(hit), detail, hit if entity_named else [])
    if kind == "tail_ratio_up":
        t = rule.tail_ratio_up
        if t.median_signal not in snap.current:
            return None
        p99, p50 = mean(cur.values()), mean(_values(snap.current[t.median_signal]).values())
        if p50 <= 0:
            return None
        now = p99 / p50
        if sid in snap.baseline and t.median_signal in snap.baseline:
            b99 = mean(_values(snap.baseline[sid]).values())
            b50 = mean(_values(snap.baseline[t.median_signal]).values())
            if b50 <= 0 or b99 <= 0:
                return None
            base = b99 / b50
            present = now / base >= t.factor
            detail = f"{sid}/{t.median_signal} {base:.2f} -> {now:.2f} (x{now / base:.2f})"
        else:
            present = now >= t.absolute
            detail = f"{sid}/{t.median_signal} = {now:.2f} (no baseline; threshold {t.absolute:g})"
        return Observation(finding.id, sid, present, detail)
    raise AssertionError(f"unhandled rule kind {kind}")
