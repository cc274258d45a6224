"""Peer comparison: which GPU, rank, node or link stands out from the others."""
import numpy as np


def best_peer_shortfalls(values: dict, direction: str, min_rel: float) -> dict:
    """Entities at least `min_rel` worse than the best peer (the highest for direction low), as {entity: shortfall}."""
    if len(values) < 2:
        return {}
    best = max(values.values()) if direction == "low" else min(values.values())
    scale = max(abs(best), 1e-12)
    gap = {n: (best - v if direction == "low" else v - best) / scale for n, v in values.items()}
    return {n: g for n, g in gap.items() if g >= min_rel}


def robust_outliers(values: dict, direction: str, min_z: float, min_rel: float, min_peers: int) -> dict:
    """Entities whose value is far from their peers' median, as {entity: robust z}.

    Notes
    -----
    1. Take the median of all entities' values and the median absolute deviation (MAD).
    2. Scale = 1.4826 * MAD (the standard deviation for normal data), floored at 2% of the median
       so that 31 identical GPUs and one slow one still give a finite, large score.
    3. Robust z = (value - median) / scale, signed so that positive means "in `direction`".
    4. Flag an entity when z >= min_z and its relative deviation |value - median| / |median| >= min_rel:
       both a statistical and a practical difference are required.
    5. With fewer than `min_peers` entities there is no peer group: nothing is flagged.
    """
    if len(values) < min_peers:
        return {}
    names = list(values)
    x = np.fromiter((values[n] for n in names), dtype=float, count=len(names))
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    scale = max(1.4826 * mad, 0.02 * abs(med), 1e-12)
    sign = -1.0 if direction == "low" else 1.0
    z = sign * (x - med) / scale
    rel = np.abs(x - med) / max(abs(med), 1e-12)
    hit = np.nonzero((z >= min_z) & (rel >= min_rel))[0]
    return {names[i]: float(z[i]) for i in hit}
