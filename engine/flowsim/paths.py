"""Routing: which links each flow crosses, as a sparse flow-by-link incidence (COO rows).

* ``ecmp``: every switch picks the egress cable by a hash of (source NIC, destination NIC, queue-pair key),
  salted per switch tier and per seed (a hash seed per switch layer, as real switches use to avoid
  polarisation). Several QPs per connection are different keys, hence independent draws.
* ``pinned``: static destination-based routes (D-mod-k, the fat-tree routing of subnet managers): the uplink is
  the destination's slot on its leaf mod the uplink count, the spine uplink the destination's leaf-level index
  mod the spine's uplinks, and the way down uses the same cable indices (the cable with the uplink's index
  reaches the same spine or core). Collision-free for a full, aligned shift; not for scattered jobs.
* ``adaptive``: per-packet adaptive routing / spraying splits a flow evenly over every equal-cost cable; on a
  folded Clos that is exactly one aggregate link per leaf uplink set and per pod spine-core set (the
  ``bundles`` link set), so the incidence stays one entry per hop.
"""

from __future__ import annotations

import numpy as np

from engine.flowsim.network import IntArray, LinkSet, Network

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = x.astype(np.uint64, copy=True)
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


def flow_hash(src: IntArray, dst: IntArray, key: IntArray, seed: int, salt: int) -> IntArray:
    """A 64-bit hash of (src, dst, key) for one switch layer (``salt``) and one seed, as a non-negative int64."""
    with np.errstate(over="ignore"):
        h = mix64(src.astype(np.uint64) * _GOLD + np.uint64((seed * 1_000_003 + salt * 7919) & 0xFFFFFFFF))
        h = mix64(h ^ dst.astype(np.uint64))
        h = mix64(h ^ (key.astype(np.uint64) + np.uint64(salt)))
    return (h >> np.uint64(1)).astype(np.int64)


def net_incidence(net: Network, links: LinkSet, src: IntArray, dst: IntArray, key: IntArray,
                  routing: str, seed: int) -> tuple[IntArray, IntArray]:
    """(flow index, link id) pairs for network flows from NIC ``src`` to NIC ``dst``.

    Every flow crosses its source NIC uplink and destination NIC downlink; flows between leaves add the leaf
    uplink and the downlink into the destination leaf; flows between pods (3 tiers) add a spine uplink and a
    core-to-spine downlink.
    """
    n = src.size
    idx = np.arange(n, dtype=np.int64)
    rows = [idx, idx]
    cols = [net.nic_up(src), net.nic_down(dst)]
    if net.tiers >= 2 and n:
        pa, la, _ = net.nic_place(src)
        pb, lb, sb = net.nic_place(dst)
        if np.any(pa != pb):
            raise ValueError("a network flow crosses planes (multi-plane traffic must stay on one rail)")
        cross = np.flatnonzero(la != lb)
        pa, la, lb, sb = pa[cross], la[cross], lb[cross], sb[cross]
        lga = pa * net.leaves + la
        lgb = pa * net.leaves + lb
        if net.tiers == 3:
            poda, podb = la // net.pod_leaves, lb // net.pod_leaves
            xpod = np.flatnonzero(poda != podb)
        else:
            poda = podb = xpod = np.zeros(0, dtype=np.int64)
        if links.bundled:
            rows += [cross, cross]
            cols += [links.ls_up + lga, links.ls_down + lgb]
            if xpod.size:
                rows += [cross[xpod], cross[xpod]]
                cols += [links.sc_up + pa[xpod] * net.pods + poda[xpod], links.sc_down + pa[xpod] * net.pods + podb[xpod]]
        else:
            up, spines = net.up, net.spines
            pinned = routing == "pinned"
            if pinned:  # D-mod-k digits of the destination; the way down retraces the same cable indices
                dglob = lb * net.leaf_down + sb  # destination index inside the plane (leaf-major)
                c1 = c2 = sb
                c3 = c4 = dglob // up
            else:
                s_, d_, k_ = src[cross], dst[cross], key[cross]
                c1 = flow_hash(s_, d_, k_, seed, 1)
                c2 = flow_hash(s_, d_, k_, seed, 2)
                c3 = flow_hash(s_, d_, k_, seed, 3)
                c4 = flow_hash(s_, d_, k_, seed, 4)
            u1 = c1 % up
            spine = u1 % spines
            cnt = (up - 1 - spine) // spines + 1
            u2 = u1 if pinned else spine + spines * (c2 % cnt)
            rows += [cross, cross]
            cols += [links.ls_up + lga * up + u1, links.ls_down + lgb * up + u2]
            if xpod.size:
                h, cg = net.spine_up, net.core_groups
                j = spine[xpod]
                sa = (pa[xpod] * net.pods + poda[xpod]) * spines + j
                sbb = (pa[xpod] * net.pods + podb[xpod]) * spines + j
                c_up = c3[xpod] % h
                g = c_up % cg
                cnt_c = (h - 1 - g) // cg + 1
                c_down = c_up if pinned else g + cg * (c4[xpod] % cnt_c)
                rows += [cross[xpod], cross[xpod]]
                cols += [links.sc_up + sa * h + c_up, links.sc_down + sbb * h + c_down]
    return np.concatenate(rows), np.concatenate(cols)
