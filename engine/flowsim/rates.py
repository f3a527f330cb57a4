"""Max-min fair rates by progressive filling over a sparse incidence (COO) of rate groups and links.

A *rate group* is a set of flows that move at one rate: the hops of one pipelined ring or tree channel (a ring
advances at the pace of its slowest hop, so faster hops are application-limited and leave their spare capacity
to others), or a single flow. Entry ``(link, group, weight)`` says the group puts ``weight`` flows on the link
(a ring crossing a link twice counts 2). Progressive filling raises every unfrozen group's rate together until
a link saturates, freezes the groups that cross it, and repeats; the result is the max-min fair allocation
(Bertsekas & Gallager, *Data Networks*, 6.5.2). Each round is one ``bincount`` over the remaining entries, and
rounds end when all groups are frozen: as many rounds as distinct bottleneck levels, not as flows.
"""

from __future__ import annotations

import numpy as np

from engine.flowsim.network import FloatArray, IntArray

_REL_TOL = 1e-9


def max_min_rates(link: IntArray, group: IntArray, weight: FloatArray, capacity: FloatArray,
                  n_groups: int, tier: np.ndarray | None = None,
                  rel_tol: float = _REL_TOL) -> tuple[FloatArray, IntArray]:
    """(rate per group, bottleneck link per group) of the max-min fair allocation.

    Groups with no entry get rate ``inf`` and bottleneck -1. When ``tier`` (per link) is given, a group frozen by
    several links at once reports the one of the highest tier (the fabric rather than its own NIC).
    ``rel_tol`` batches links that saturate within that fraction of the current level into one round (exact
    ties at the default); a larger value (1e-3) cuts rounds several-fold on many single-flow groups and leaves
    every rate within that fraction below its exact max-min value.
    """
    n_links = capacity.size
    rate = np.full(n_groups, np.inf)
    bottleneck = np.full(n_groups, -1, dtype=np.int64)
    residual = capacity.astype(np.float64, copy=True)
    e_link, e_group, e_w = link, group, weight
    level = 0.0
    frozen = np.zeros(n_groups, dtype=bool)
    while e_link.size:
        demand = np.bincount(e_link, weights=e_w, minlength=n_links)
        used = np.flatnonzero(demand > 0)
        ratio = residual[used] / demand[used]
        inc = float(max(ratio.min(), 0.0))
        level += inc
        residual[used] -= inc * demand[used]
        sat_links = used[ratio <= inc + rel_tol * max(level, 1e-30) + 1e-300]
        is_sat = np.zeros(n_links, dtype=bool)
        is_sat[sat_links] = True
        hit = is_sat[e_link]
        g_hit, l_hit = e_group[hit], e_link[hit]
        if tier is not None and g_hit.size:
            order = np.argsort(tier[l_hit], kind="stable")
            g_hit, l_hit = g_hit[order], l_hit[order]
        bottleneck[g_hit] = l_hit  # last write wins: highest tier
        frozen[g_hit] = True
        rate[g_hit] = level
        keep = ~frozen[e_group]
        e_link, e_group, e_w = e_link[keep], e_group[keep], e_w[keep]
    return rate, bottleneck


def link_load(link: IntArray, group: IntArray, weight: FloatArray, rate: FloatArray, n_links: int) -> FloatArray:
    """Carried load per link (Gb/s) under ``rate``."""
    r = rate[group]
    r = np.where(np.isfinite(r), r, 0.0)
    return np.bincount(link, weights=weight * r, minlength=n_links).astype(np.float64)
