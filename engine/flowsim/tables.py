"""Simulated fabric tables: what ``make fabric-tables`` writes and what the performance model reads.

``engine/fabric/data/fabric_tables.json`` holds two tables, both produced by ``scripts/fabric_tables.py``
with its parameters recorded in the file:

* ``crossing``: the share of line rate that traffic crossing a leaf's uplinks gets, by routing mode, offered
  load per uplink (crossing fraction x oversubscription, in link capacities) and hashed flows per NIC
  (NCCL channels x queue pairs). These are the inputs of the performance model's one routing function
  (:func:`engine.fabric.routing.crossing_share`), which reads this table when it is present. ``mean`` is
  carried / offered traffic (what the closed form computes); ``completion`` is the slowest crossing flow's
  share (what a collective that waits for its slowest flow sees).
* ``studies``: :func:`~engine.flowsim.simulate` efficiencies of the default catalog's
  topologies at standard sizes (fabric x topology x GPUs x oversubscription x routing x traffic x placement).

Lookups are plain Python over a small in-memory index (microseconds), so ``predict`` stays under 2 ms.
"""

from __future__ import annotations

import numpy as np

from engine.flowsim.network import Network, bundle_links, cable_links
from engine.flowsim.paths import net_incidence
from engine.flowsim.rates import max_min_rates

RATE_TOL = 1e-3  # rates within 0.1% of exact max-min (see rates.max_min_rates): 3x fewer filling rounds


# --------------------------------------------------------------------------------------------- experiment


def crossing_network(load: float, leaves: int = 64, down: int = 32, gbps: float = 400.0) -> tuple[Network, float]:
    """A 2-tier leaf/spine with one NIC per node, sized so that ``load`` = crossing fraction x down/up.

    Returns (network, crossing fraction): loads up to 1 use a non-blocking leaf and cross a fraction ``load``
    of the flows; higher loads oversubscribe the leaf (``up = down / load``) and cross everything.
    """
    if load <= 1.0:
        up, frac = down, load
    else:
        up = max(1, round(down / load))
        frac = min(1.0, load * up / down)
    net = Network(
        gpus=leaves * down, gpus_per_node=1, nics_per_node=1, nodes=leaves * down, nvlink_domain=1, nvlink_gbps=0.0,
        nic_gbps=gbps, link_gbps=gbps, topology="fat-tree", fabric="simulated", tiers=2, radix=down + up, planes=1,
        rails=1, leaf_down=down, up=up, leaves=leaves, spines=up, pod_leaves=leaves, pods=1, spine_up=0, cores=0,
        oversubscription=down / up,
    )
    return net, frac


PATTERNS = ("aligned", "scattered")


def crossing_experiment(routing: str, load: float, flows_per_nic: int, seeds: int = 10,
                        leaves: int = 64, down: int = 32, pattern: str = "aligned") -> dict[str, float]:
    """Every NIC sends ``flows_per_nic`` equal flows and receives as many (so its ideal rate per flow is line
    rate / flows). For flow index ``k`` a random set of slots (the same on every leaf) leaves the leaf, the
    other slots send to each other inside it. ``aligned`` (a job on its own nodes: ring, tree and DP
    neighbours across a leaf boundary): every leaf's crossing flows go to one partner leaf (a random leaf
    derangement), onto distinct slots there. ``scattered`` (a job spread over a shared fleet): the crossing
    NICs send to a random permutation of each other cluster-wide, so flows from several leaves meet on a
    destination leaf's downlinks. Returns the mean and the median-over-seeds slowest share of line rate of the
    crossing flows, and the offered load."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {PATTERNS}, got {pattern!r}")
    net, frac = crossing_network(load, leaves, down)
    n = net.nics
    cables, bundles = cable_links(net), bundle_links(net)
    mean, comp = [], []
    for seed in range(seeds):
        rng = np.random.default_rng([17, seed])
        src, dst, key, crossing = _crossing_flows(n, leaves, down, frac, flows_per_nic, rng, pattern)
        links = bundles if routing == "adaptive" else cables
        fi, li = net_incidence(net, links, src, dst, key, "pinned" if routing == "pinned" else "ecmp", seed)
        w = np.ones(li.size)
        endpoint = li < net.n_endpoint_links
        ideal, _ = max_min_rates(li[endpoint], fi[endpoint], w[endpoint], links.capacity, src.size, rel_tol=RATE_TOL)
        rate, _ = max_min_rates(li, fi, w, links.capacity, src.size, rel_tol=RATE_TOL)
        share = np.minimum(1.0, rate[crossing] / ideal[crossing]) if crossing.any() else np.ones(1)
        mean.append(float(share.mean()))
        comp.append(float(share.min()))
    return {"mean": float(np.mean(mean)), "completion": float(np.median(comp)), "load": frac * down / net.up}


def _crossing_flows(n: int, leaves: int, down: int, frac: float, flows_per_nic: int, rng: np.random.Generator,
                    pattern: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    srcs, dsts, keys, cross = [], [], [], []
    leaf = np.arange(n, dtype=np.int64) // down
    slot = np.arange(n, dtype=np.int64) % down
    n_cross = round(frac * down)
    for k in range(flows_per_nic):
        crossing_slots = np.zeros(down, dtype=bool)
        crossing_slots[rng.choice(down, size=n_cross, replace=False)] = True
        stay = np.flatnonzero(~crossing_slots)
        inside = np.arange(down, dtype=np.int64)
        inside[stay] = np.roll(stay, -1)  # cyclic shift among the slots that stay
        c = crossing_slots[slot]
        d = leaf * down + inside[slot]
        out = np.flatnonzero(c)
        if pattern == "scattered":  # crossing NICs: a random permutation among themselves
            d[out] = out[rng.permutation(out.size)]
        else:  # one partner leaf per leaf, crossing slots permuted among themselves
            perm = rng.permutation(leaves)
            partner = np.empty(leaves, dtype=np.int64)
            partner[perm] = np.roll(perm, -1)
            cs = np.flatnonzero(crossing_slots)
            sigma = np.arange(down, dtype=np.int64)
            sigma[cs] = cs[rng.permutation(cs.size)]
            d[out] = partner[leaf[out]] * down + sigma[slot[out]]
        c = leaf != d // down
        keep = d != np.arange(n)
        srcs.append(np.arange(n, dtype=np.int64)[keep])
        dsts.append(d[keep])
        keys.append(np.full(int(keep.sum()), k, dtype=np.int64))
        cross.append(c[keep])
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(keys), np.concatenate(cross)


