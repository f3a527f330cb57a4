"""What one flow-level simulation will cost — flows, incidence entries, memory and time — counted from the job's
shape before a single array is built.

:func:`estimate_job` is pure arithmetic on the structural numbers of the :class:`~engine.flowsim.network.Network`
(GPUs, NVLink domain, tiers, leaves, uplinks), the job's :class:`~engine.flowsim.placement.Layout`, its
collectives, channels and queue pairs. The counts mirror the generators of :mod:`engine.flowsim.traffic`:

* ring (per channel): one NVLink flow per rank whose NVLink domain holds more of its group, one network flow per
  domain segment of a group that spans several domains;
* tree (per channel): a chain inside each segment and a binary tree over the segments, both directions;
* all-to-all: every rank sends once to each other segment of its group, plus every ordered pair inside a segment;
* pipeline send/recv: two flows per stage boundary; permutation and cross-leaf: one flow per rank; background:
  one flow per GPU of the busy share of the other nodes;

each multiplied by the queue pairs, and every network flow crossing at most two links per switch tier. Memory and
time follow from the counts with per-entry costs measured on the development machine
(docs/security.md "Admission"): the incidence arrays and their copies dominate
memory, and time is one pass over the entries per seed plus one pass over the remaining entries and every link per
progressive-filling round. The number of rounds is the one figure that cannot be counted in advance (one per
distinct bottleneck level); it is estimated from the number of rate groups: hashed routing of many single-flow
groups (all-to-all, permutations, several QPs) produces many levels, rings and adaptive routing very few.

The simulator refuses before its first allocation what exceeds the engine's own ceilings
(:data:`~engine.schema.bounds.MAX_STUDY_FLOWS`, :data:`~engine.schema.bounds.MAX_STUDY_BYTES`); the platform
compares the same estimate with its run budgets before it queues a fabric study.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from engine.flowsim.network import Network
from engine.flowsim.placement import Layout
from engine.schema.bounds import MAX_STUDY_BYTES, MAX_STUDY_FLOWS, check_estimate, check_work

# Measured costs (one core of the 2-core development machine, numpy 2; docs/security.md "Admission").
SECONDS_PER_ENTRY = 1e-7  # generate, hash, route and price one incidence entry (ideal and actual pass)
SECONDS_PER_ROUND_ELEMENT = 4.5e-9  # one progressive-filling round over one remaining entry or one link
SECONDS_PER_LINK = 1e-7  # link arrays, loads and utilisation per seed
BYTES_PER_ENTRY = 60  # link + group + weight of each entry, the routing's rows/cols and the filling's copies
BYTES_PER_FLOW = 40  # source, destination, key and group of each flow, before and after QP expansion
BYTES_PER_LINK = 60  # capacity, tier, demand, residual and load of each link
STUDY_BYTES_BASE = 16 * 1024**2  # the scenario, its topology and the result
MIN_ROUNDS = 8
ADAPTIVE_ROUNDS = 16  # even splits over aggregates: a handful of levels (measured: 2-12)
# Share of a collective's rate groups that become a filling round of their own under hashed routing (measured):
# one flow per NIC (permutation, cross-leaf, pipeline, background) ~0.2-0.5%; all-to-all (a NIC carries a flow per
# remote domain) ~2-4%; several queue pairs split each connection into sub-flows that saturate apart (~17% at 8).
ROUND_SHARE = {"single": 0.005, "all-to-all": 0.025, "channels": 0.03}
ROUND_SHARE_PER_QP = 0.03
MAX_ROUND_SHARE = 0.25


@dataclass(frozen=True)
class SimulationEstimate:
    """The cost of one :func:`~engine.flowsim.simulate.simulate` call (``flows`` ... ``rounds`` per seed)."""

    ranks: int
    seeds: int
    flows: int
    network_flows: int
    groups: int
    entries: int
    links: int
    rounds: int
    bytes: int
    seconds: float  # all seeds

    @property
    def seconds_per_seed(self) -> float:
        return self.seconds / max(self.seeds, 1)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds_per_seed": self.seconds_per_seed}


_STRIDE = {"all": lambda lay: 1, "tp": lambda lay: 1, "cp": lambda lay: lay.tp, "dp": lambda lay: lay.tp * lay.cp,
           "pp": lambda lay: lay.tp * lay.cp * lay.dp, "ep": lambda lay: lay.tp}
_SIZE = {"all": lambda lay: lay.ranks, "tp": lambda lay: lay.tp, "cp": lambda lay: lay.cp, "dp": lambda lay: lay.dp,
         "pp": lambda lay: lay.pp, "ep": lambda lay: lay.ep}


def _segments(net: Network, layout: Layout, group: str, placement: str) -> tuple[int, int, int, int]:
    """(groups, group size, members per NVLink segment, segments per group) of the parallel group ``group``."""
    size = max(1, _SIZE[group](layout))
    stride = max(1, _STRIDE[group](layout))
    n_groups = max(1, layout.ranks // size)
    domain = net.nvlink_domain
    if placement != "packed" and domain > net.gpus_per_node:
        domain = net.gpus_per_node  # scattered nodes: only a node is sure to share an NVLink domain
    per_segment = min(size, max(1, domain // stride)) if stride < domain else 1
    return n_groups, size, per_segment, math.ceil(size / per_segment)


def _collective(kind: str, n_groups: int, size: int, k: int, segs: int, channels: int) -> tuple[int, int, int]:
    """(NVLink flows, network flows, rate groups) of one collective, before queue pairs."""
    ranks = n_groups * size
    if kind in ("ring-allreduce", "ring-allgather", "ring-reducescatter"):
        nv = ranks if k > 1 else 0
        net = n_groups * segs if segs > 1 else 0
        return channels * nv, channels * net, channels * n_groups
    if kind == "tree-allreduce":
        return channels * 2 * n_groups * (size - segs), channels * 2 * n_groups * (segs - 1), channels * n_groups
    if kind == "all-to-all":
        nv, net = n_groups * segs * k * (k - 1), ranks * (segs - 1)
        return nv, net, nv + net
    if kind == "pp-sendrecv":
        flows = 2 * n_groups * (size - 1)
        return 0, flows, flows
    return 0, ranks, ranks  # permutation, cross-leaf: one flow per rank


def _round_share(kind: str, qps: int) -> float:
    """Expected share of ``kind``'s rate groups that saturate at a level of their own under hashed routing."""
    base = ROUND_SHARE["all-to-all" if kind == "all-to-all" else
                       "channels" if kind in ("ring-allreduce", "ring-allgather", "ring-reducescatter",
                                              "tree-allreduce") else "single"]
    return base if qps == 1 else min(MAX_ROUND_SHARE, max(base, ROUND_SHARE_PER_QP * qps))


def _links(net: Network, routing: str) -> int:
    endpoints = net.n_endpoint_links
    if routing == "adaptive":
        leaves = net.leaves_total if net.tiers >= 2 else 0
        pods = net.pods_total if net.tiers == 3 else 0
        return endpoints + 2 * leaves + 2 * pods
    cables = net.leaves_total * net.up if net.tiers >= 2 else 0
    spine = net.spines_total * net.spine_up if net.tiers == 3 else 0
    return endpoints + 2 * cables + 2 * spine


def estimate_job(net: Network, layout: Layout, collectives: Sequence[tuple[str, str]], *, placement: str,
                 channels: int, qps: int, routing: str, background: float, job_nodes: int,
                 seeds: int) -> SimulationEstimate:
    """The estimate of one simulation of ``collectives`` (``(kind, group)`` pairs) on ``net``."""
    nv = net_flows = groups = 0
    levels = float(MIN_ROUNDS)
    for kind, group in collectives:
        n_groups, size, k, segs = _segments(net, layout, group, placement)
        a, b, g = _collective(kind, n_groups, size, k, segs, channels)
        nv, net_flows, groups = nv + a, net_flows + b, groups + g
        levels += _round_share(kind, qps) * g * qps
    if background > 0:
        other = max(net.nodes - job_nodes, 0) * net.gpus_per_node
        busy = math.ceil(other * min(background, 1.0))
        net_flows, groups = net_flows + busy, groups + busy
        levels += _round_share("permutation", qps) * busy * qps
    nv, net_flows, groups = nv * qps, net_flows * qps, groups * qps
    flows = nv + net_flows
    entries = 2 * nv + 2 * max(net.tiers, 1) * net_flows
    links = _links(net, routing)
    rounds = int(min(groups, ADAPTIVE_ROUNDS if routing == "adaptive" else levels))
    per_seed = (SECONDS_PER_ENTRY * entries + SECONDS_PER_LINK * links
                + SECONDS_PER_ROUND_ELEMENT * rounds * (entries / 2 + links))
    memory = STUDY_BYTES_BASE + BYTES_PER_ENTRY * entries + BYTES_PER_FLOW * flows + BYTES_PER_LINK * links
    return SimulationEstimate(ranks=layout.ranks, seeds=seeds, flows=flows, network_flows=net_flows, groups=groups,
                              entries=entries, links=links, rounds=rounds, bytes=int(memory),
                              seconds=per_seed * seeds)


def check_simulation(estimate: SimulationEstimate) -> None:
    """The engine's own ceilings (flows per seed, peak memory), checked before anything is allocated."""
    check_work("flows per seed (after queue pairs)", estimate.flows, MAX_STUDY_FLOWS, "ranks",
               "simulate fewer ranks, smaller groups (traffic 'all-to-all:ep', 'ring-allreduce:dp') or fewer QPs")
    check_estimate("memory for one fabric simulation", estimate.bytes, MAX_STUDY_BYTES, "ranks", "bytes",
                   "simulate fewer ranks, smaller groups or fewer QPs")
