"""Where a group of ranks sits on the fabric, and the cluster numbers every collective reads.

Ranks are ordered TP innermost, then CP, DP, PP (Megatron order; with DP outermost, TP, CP, PP, DP: a DP x CP
group is then CP blocks strided over the job, :func:`place_nested`), so a group of stride ``s`` has
``k = clip(D/s, 1, n)`` ranks in each NVLink domain of ``D`` GPUs (8 on HGX, 72 on NVL72) and spans ``n/k``
domains. NCCL knows nothing of switches: ring and tree neighbours follow the rank order, which the launcher's
host list does not align with leaves, so a hop leaves its leaf with probability ``1 - (m-1)/(N-1)`` where ``m``
of the group's ``N`` nodes share the leaf (the same holds exactly for all-to-all destinations). Same for the pod
(spine) tier. Where the scheduler orders ranks by switch (``cluster.rank_assignment`` topology-aware) a ring
leaves each block of ``m`` once, ``ceil(N/m)/N`` of its edges (:func:`ring_cross_fraction`, ``share_ring``);
all-to-all, PAT and tree partners keep the unaligned fraction. Inter-node traffic runs at the node's NIC rate times the routing share
(:func:`engine.fabric.routing.crossing_share`) of every tier it crosses, with load = crossing fraction x that
tier's oversubscription; hop latency grows with the highest tier crossed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from engine.fabric.routing import CHANNELS_PER_NIC, crossing_share
from engine.performance.collectives.kinds import CollectiveKind
from engine.units import Arr, BoolArr, Count, Ratio, Seconds

# NVLink hop latency (NVLink + NVSwitch, one ring step): about 1 us.
NVLINK_HOP_S = 1.0e-6
# Latency of a 64-byte transfer, measured on H800 clusters (DeepSeek ISCA'25; data/validation/
# fabric_measurements.json): IB 2.8 us same leaf, 3.7 us across leaves (2 more switches) -> 2.35 us + 0.45 us
# per switch; RoCE 3.6 / 5.6 us -> 2.6 us + 1.0 us per switch. A fabric not in the table is costed as RoCE.
NET_BASE_S = {"infiniband": 2.35e-6, "roce": 2.6e-6}
SWITCH_HOP_S = {"infiniband": 0.45e-6, "roce": 1.0e-6}
DEFAULT_FABRIC = "roce"
# Switches a path traverses in a folded Clos: 1 inside a leaf, 3 through a spine (leaf-spine-leaf), 5 through
# the core (leaf-spine-core-spine-leaf); a fabric of T tiers has at most 2T - 1 on any path.
SWITCHES_IN_LEAF = 1.0
SWITCHES_IN_POD = 3.0
SWITCHES_ACROSS_PODS = 5.0
# A path climbs to its highest tier and back down: T tiers, at most 2T - 1 switches.
UP_AND_DOWN = 2.0
# Tiers at which the leaf and the pod (spine) tier exist: a 1-tier fabric is one switch per rail / plane.
LEAF_TIER = 2.0
POD_TIER = 3.0
# A point-to-point transfer is a group of two ranks.
PAIR_RANKS = 2.0


@dataclass(frozen=True)
class Net:
    """The scalars of one cluster the collective model reads (built once per scenario by ``Context.net``)."""

    domain: float  # GPUs per NVLink domain
    job_nodes: float  # NVLink domains (nodes) of the job
    leaf_nodes: float  # nodes whose same-rail NICs share one leaf switch
    pod_nodes: float  # nodes under one non-blocking pod (spine tier); = job when 2 tiers
    oversub_leaf: float
    oversub_spine: float
    tiers: float
    fabric: str
    routing: str
    qps: float
    nic_bw_gpu: float  # bytes/s per GPU: line rate x protocol efficiency
    nvl_ring: float  # bytes/s NVLink bus bandwidth, ring
    nvl_ar: float  # bytes/s NVLink all-reduce bus bandwidth (NVLS where the switch reduces)
    nvls: bool
    sharp: bool = False
    ring_aligned: bool = False  # cluster.rank_assignment topology-aware: ring neighbours follow the switches
    gpus_per_nic: float = 1.0  # GPUs of a node sharing one NIC (1 rail-optimised; 8 with one NIC per 8-GPU node)
    alpha_override: float | None = None  # calibration: per-step network latency [s]
    pinned_share: float | None = None  # a pinned fabric study's share for this routing (pinned_study.py)
    # NCCL algorithms not yet released at the scenario's training.framework_release (issue #22; Context.net)
    unreleased_algorithms: frozenset[str] = frozenset()
    bw_scale_ar: float = 1.0  # calibration: NIC bandwidth multiplier per collective kind
    bw_scale_ag: float = 1.0
    bw_scale_rs: float = 1.0
    bw_scale_a2a: float = 1.0
    bw_scale_p2p: float = 1.0

    def bw_scale(self, kind: CollectiveKind) -> float:
        """The calibration multiplier on NIC bandwidth for ``kind`` (1.0 unless a profile sets it)."""
        return float(getattr(self, f"bw_scale_{kind}", 1.0))


@dataclass(frozen=True)
class Placement:
    """One group of ranks on the fabric (arrays over layouts)."""

    k: Count  # ranks per NVLink domain
    nodes: Count  # domains spanned by the group
    f_leaf: Ratio  # fraction of inter-node peers outside the leaf
    f_pod: Ratio  # ... outside the pod
    share: Ratio  # bandwidth share of the crossing tiers (routing x oversubscription)
    hop: Seconds  # per-step network latency
    # the same for a ring's neighbour traffic (ring_cross_fraction where the ranks follow the switches; = share
    # otherwise)
    share_ring: Ratio


def cross_fraction(members_in_tier: Arr, nodes: Count) -> Ratio:
    """Probability that a peer of a rank sits outside its tier (peers uniform over the group's nodes)."""
    m = np.clip(members_in_tier, 1.0, nodes)
    return np.where(nodes > 1.0, 1.0 - (m - 1.0) / np.maximum(nodes - 1.0, 1.0), 0.0)


def ring_cross_fraction(members_in_tier: Arr, nodes: Count) -> Ratio:
    """Share of a ring's edges that leave a tier when the ranks follow the switches (cluster.rank_assignment
    topology-aware): N domains in blocks of m under one switch of the tier form ceil(N / m) blocks, and the ring
    leaves each block once: ceil(N / m) / N of its edges (1 / m for whole blocks), none when one block holds the
    group. Never above the unaligned fraction (:func:`cross_fraction`): an order by switch is never worse than
    an arbitrary one (for a group barely wider than one block the peer-uniform figure is the smaller)."""
    m = np.clip(members_in_tier, 1.0, nodes)
    blocks = np.ceil(nodes / m - 1e-9)
    aligned = np.where(blocks > 1.0, blocks / np.maximum(nodes, 1.0), 0.0)
    return np.minimum(aligned, cross_fraction(members_in_tier, nodes))


def _hop_latency(net: Net, f_leaf: Ratio, f_pod: Ratio) -> Seconds:
    """Per-step network latency: the fabric's base plus one switch latency per switch of the highest tier crossed."""
    switches = np.where(f_pod > 0.0, SWITCHES_ACROSS_PODS, np.where(f_leaf > 0.0, SWITCHES_IN_POD, SWITCHES_IN_LEAF))
    switches = np.minimum(switches, UP_AND_DOWN * net.tiers - 1.0)
    base = NET_BASE_S.get(net.fabric, NET_BASE_S[DEFAULT_FABRIC])
    return base + switches * SWITCH_HOP_S.get(net.fabric, SWITCH_HOP_S[DEFAULT_FABRIC])


def place(net: Net, n: Count, stride: Count) -> Placement:
    """Placement of a group of ``n`` ranks spaced ``stride`` GPUs apart."""
    n = np.maximum(n, 1.0)
    k = np.clip(net.domain / np.maximum(stride, 1.0), 1.0, n)
    nodes = n / k
    span_nodes = np.maximum(nodes, n * stride / net.domain)  # job nodes the group is spread over
    return _spread(net, n, k, nodes, span_nodes)


def place_nested(net: Net, n_in: Count, stride_in: Count, n_out: Count, stride_out: Count) -> Placement:
    """Placement of a group that is ``n_out`` blocks ``stride_out`` GPUs apart, each block ``n_in`` ranks
    ``stride_in`` apart (``stride_out >= n_in * stride_in``): DP x CP with DP outermost (CP at stride t, DP at
    stride t c p). Ranks per domain multiply per level; the group spreads over ``n_out * stride_out`` GPUs.
    With ``n_in = 1`` it is :func:`place` of ``n_out`` ranks at ``stride_out``."""
    n_in, n_out = np.maximum(n_in, 1.0), np.maximum(n_out, 1.0)
    n = n_in * n_out
    k = (np.clip(net.domain / np.maximum(stride_in, 1.0), 1.0, n_in)
         * np.clip(net.domain / np.maximum(stride_out, 1.0), 1.0, n_out))
    nodes = n / k
    span_gpus = np.where(n_out > 1.0, n_out * stride_out, n_in * stride_in)
    return _spread(net, n, k, nodes, np.maximum(nodes, span_gpus / net.domain))


def _tier_fractions(net: Net, fraction: Callable[[Arr, Count], Ratio], dens: Ratio,
                    nodes: Count) -> tuple[Ratio, Ratio]:
    """The leaf and pod crossing fractions of a group of ``nodes`` domains at density ``dens``, by ``fraction``
    (:func:`cross_fraction` or :func:`ring_cross_fraction`); zero for a tier the fabric does not have."""
    f_leaf = fraction(net.leaf_nodes * dens, nodes) if net.tiers >= LEAF_TIER else np.zeros_like(nodes)
    f_pod = np.where(net.tiers >= POD_TIER, fraction(net.pod_nodes * dens, nodes), 0.0)
    return f_leaf, f_pod


def _routing_share(net: Net, f_leaf: Ratio, f_pod: Ratio) -> Ratio:
    """Throughput / demand of traffic crossing the leaf and pod tiers at those fractions: the smaller tier share."""
    flows = CHANNELS_PER_NIC
    s_leaf = np.where(f_leaf > 0, crossing_share(net.routing, net.fabric, f_leaf * net.oversub_leaf, flows, net.qps,
                                                 net.pinned_share), 1.0)
    s_pod = np.where(f_pod > 0, crossing_share(net.routing, net.fabric, f_pod * net.oversub_spine, flows, net.qps,
                                               net.pinned_share), 1.0)
    return np.minimum(s_leaf, s_pod)


def _spread(net: Net, n: Count, k: Count, nodes: Count, span_nodes: Count) -> Placement:
    """The tiers a group of ``nodes`` domains spread over ``span_nodes`` job nodes crosses, and what they cost."""
    dens = nodes / span_nodes  # share of spanned nodes that hold a member
    f_leaf, f_pod = _tier_fractions(net, cross_fraction, dens, nodes)
    share = _routing_share(net, f_leaf, f_pod)
    share_ring = (_routing_share(net, *_tier_fractions(net, ring_cross_fraction, dens, nodes)) if net.ring_aligned
                  else share)
    hop = _hop_latency(net, f_leaf, f_pod)
    if net.alpha_override is not None:
        hop = np.full_like(n, net.alpha_override)
    return Placement(k=k, nodes=nodes, f_leaf=f_leaf, f_pod=f_pod, share=share, hop=hop, share_ring=share_ring)


def on_nic(pl: Placement) -> BoolArr:
    """True where a group's traffic leaves the NVLink domain (uses the NICs)."""
    return np.asarray(pl.nodes > 1.0)
