"""Collective communication as NCCL runs it, on the fabric the traffic actually crosses.

One collective (all-reduce ``ar``, all-gather ``ag``, reduce-scatter ``rs``, all-to-all ``a2a``) over ``n``
ranks spaced ``stride`` GPUs apart, vectorised over layouts. Structure follows NCCL's cost model
(src/graph/tuning.cc: time = base latency + steps x hop latency + bytes / bus bandwidth, per algorithm and
protocol, minimum taken), with our own constants and sources:

* **Placement.** Ranks are ordered TP innermost, then CP, DP, PP (Megatron order), so a group of stride
  ``s`` has ``k = clip(D/s, 1, n)`` ranks in each NVLink domain of ``D`` GPUs (8 on HGX, 72 on NVL72) and
  spans ``n/k`` domains. NCCL knows nothing of switches: ring and tree neighbours follow the rank order,
  which the launcher's host list does not align with leaves, so a hop leaves its leaf with probability
  ``1 - (m-1)/(N-1)`` where ``m`` of the group's ``N`` nodes share the leaf (the same holds exactly for
  all-to-all destinations). Same for the pod (spine) tier.
* **Tiers.** Traffic that stays in the NVLink domain runs at NVLink speed; inter-node traffic at the node's
  NIC rate times the routing share (:func:`engine.fabric.routing.crossing_share`) of every tier it
  crosses, with load = crossing fraction x that tier's oversubscription. Hop latency grows with the highest
  tier crossed (switches traversed 1, 3, 5).
* **Algorithms.** ring (all), tree (ar: NCCL's double binary tree across nodes, chain inside),
  NVLS (ar inside an NVSwitch domain on Hopper and later: reduction in the switch, nvlink_ar_eff),
  CollNet/SHARP (ar across nodes on InfiniBand when in-network reduction is enabled: each byte crosses the
  NIC once up and once down instead of 2(n-1)/n times), PAT (ag/rs with one rank per node, NCCL >= 2.23:
  log2(n) steps instead of n-1). Hierarchical NVLink-then-NIC: a ring's bus bandwidth is the smaller of the
  NVLink bus bandwidth and the node's aggregate NIC bandwidth (k NICs).
* **Protocols.** LL (8-byte stores carrying 4 bytes of data and a flag: 50% of bandwidth, lowest latency),
  LL128 (120 of 128 bytes: 94%), Simple (full bandwidth, memory fences: highest latency). The minimum over
  algorithm x protocol gives the latency-to-bandwidth ramp of nccl-tests curves: latency-bound below
  ~64 KiB, half bandwidth around 1-4 MiB across nodes, within a few percent of bus bandwidth above 256 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.fabric.routing import CHANNELS_PER_NIC, crossing_share

Arr = npt.NDArray[np.float64]

# Per protocol: (fraction of link bandwidth carried, fixed launch/sync latency per collective [s],
# extra latency per network hop [s], extra per NVLink hop [s]). LL: 4 of 8 bytes are flags; LL128: 120/128;
# Simple: full rate with fence-based synchronisation (~6 us per sync point, "Demystifying NCCL",
# arXiv 2507.04786). Base latencies are of the order of NCCL's own tuning table (4-12 us per collective).
# Resulting small-message all-reduce: 19 us on 8 H100 (one node), 24 us on 2 nodes, 48 us on 16 nodes,
# 70 us on 128 nodes; large messages reach the measured bus bandwidths (480 GB/s NVLS in a node, 8 x 47.5 GB/s
# across NDR nodes: nccl-tests #212, #290). Alltoall cannot aggregate several NICs (nccl-tests #267): each
# rank's inter-node share goes through its own NIC, as modelled below.
PROTOCOLS = {
    "LL": (0.50, 5.0e-6, 0.0, 0.0),
    "LL128": (0.94, 8.0e-6, 0.5e-6, 0.3e-6),
    "Simple": (1.00, 9.0e-6, 2.0e-6, 1.5e-6),
}
# NCCL's tree all-reduce reaches a lower fraction of the ring's bus bandwidth (pipelining over a
# depth-log2 tree with chains inside the node): about 0.85-0.9 in nccl-tests at 2-16 nodes.
TREE_BW_EFF = 0.87
# NVLink hop latency (NVLink + NVSwitch, one ring step): about 1 us.
NVLINK_HOP_S = 1.0e-6
# Latency of a 64-byte transfer, measured on H800 clusters (DeepSeek ISCA'25; data/validation/
# fabric_measurements.json): IB 2.8 us same leaf, 3.7 us across leaves (2 more switches) -> 2.35 us + 0.45 us per switch;
# RoCE 3.6 / 5.6 us -> 2.6 us + 1.0 us per switch.
NET_BASE_S = {"infiniband": 2.35e-6, "roce": 2.6e-6}
SWITCH_HOP_S = {"infiniband": 0.45e-6, "roce": 1.0e-6}


@dataclass(frozen=True)
class Net:
    """The scalars of one cluster the collective model reads (built once per scenario by model.make_context)."""

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
    alpha_override: float | None = None  # calibration: per-step network latency [s]
    pinned_share: float | None = None  # a pinned fabric study's share for this routing (pinned_study.py)
    bw_scale_ar: float = 1.0
    bw_scale_ag: float = 1.0
    bw_scale_rs: float = 1.0
    bw_scale_a2a: float = 1.0
    bw_scale_p2p: float = 1.0


def _cross_frac(members_in_tier: Arr, nodes: Arr) -> Arr:
    """Probability that a peer of a rank sits outside its tier (peers uniform over the group's nodes)."""
    m = np.clip(members_in_tier, 1.0, nodes)
    return np.where(nodes > 1.0, 1.0 - (m - 1.0) / np.maximum(nodes - 1.0, 1.0), 0.0)


@dataclass
class Placement:
    k: Arr  # ranks per NVLink domain
    nodes: Arr  # domains spanned by the group
    f_leaf: Arr  # fraction of inter-node peers outside the leaf
    f_pod: Arr  # ... outside the pod
    share: Arr  # bandwidth share of the crossing tiers (routing x oversubscription)
    hop: Arr  # per-step network latency [s]


def place(net: Net, n: Arr, stride: Arr) -> Placement:
    n = np.maximum(n, 1.0)
    k = np.clip(net.domain / np.maximum(stride, 1.0), 1.0, n)
    nodes = n / k
    span_nodes = np.maximum(nodes, n * stride / net.domain)  # job nodes the group is spread over
    dens = nodes / span_nodes  # share of spanned nodes that hold a member
    # a 1-tier fabric is one switch per rail/plane: nothing leaves it
    f_leaf = _cross_frac(net.leaf_nodes * dens, nodes) if net.tiers >= 2 else np.zeros_like(nodes)
    f_pod = np.where(net.tiers >= 3, _cross_frac(net.pod_nodes * dens, nodes), 0.0)
    flows = CHANNELS_PER_NIC
    s_leaf = np.where(f_leaf > 0, crossing_share(net.routing, net.fabric, f_leaf * net.oversub_leaf, flows, net.qps,
                                                 net.pinned_share), 1.0)
    s_pod = np.where(f_pod > 0, crossing_share(net.routing, net.fabric, f_pod * net.oversub_spine, flows, net.qps,
                                               net.pinned_share), 1.0)
    share = np.minimum(s_leaf, s_pod)
    switches = np.where(f_pod > 0.0, 5.0, np.where(f_leaf > 0.0, 3.0, 1.0))
    switches = np.minimum(switches, 2.0 * net.tiers - 1.0)
    hop = NET_BASE_S.get(net.fabric, 2.6e-6) + switches * SWITCH_HOP_S.get(net.fabric, 1.0e-6)
    if net.alpha_override is not None:
        hop = np.full_like(n, net.alpha_override)
    return Placement(k=k, nodes=nodes, f_leaf=f_leaf, f_pod=f_pod, share=share, hop=hop)


def _scale(net: Net, kind: str) -> float:
    return float(getattr(net, f"bw_scale_{kind}", 1.0))


def collective(net: Net, kind: str, nbytes: Arr, n: Arr, stride: Arr, pl: Placement | None = None) -> Arr:
    """Time [s] of one collective; ``nbytes`` = full buffer per rank (reduced tensor for ar/rs, gathered
    output for ag, send buffer for a2a). Bus volume: ar 2(n-1)/n, ag/rs/a2a (n-1)/n of ``nbytes``.
    ``pl``: the group's placement when the caller already has it (``place(net, n, stride)``)."""
    n = np.maximum(n, 1.0)
    p = pl if pl is not None else place(net, n, stride)
    k, nodes = p.k, p.nodes
    inter = nodes > 1.0
    frac = np.where(n > 1, (n - 1.0) / n, 0.0)
    nic_node = k * net.nic_bw_gpu * p.share * _scale(net, kind)  # a node's aggregate NIC rate for the group
    nvl = net.nvl_ar if (kind == "ar" and net.nvls) else net.nvl_ring
    best = np.full_like(n, np.inf)
    if kind == "a2a":
        # each rank sends (k-1)/n of its buffer over NVLink and (n-k)/n over its own NIC, concurrently
        t_nvl = nbytes * (k - 1.0) / n / net.nvl_ring
        t_net = nbytes * (n - k) / n / (net.nic_bw_gpu * p.share * _scale(net, "a2a"))
        lat = np.where(inter, p.hop * np.log2(np.maximum(nodes, 2.0)), NVLINK_HOP_S) + (n - 1.0) * 0.1e-6
        return np.where(n > 1.0, np.maximum(t_nvl, t_net) + lat + PROTOCOLS["Simple"][1], 0.0)
    mult = 2.0 if kind == "ar" else 1.0
    vol = nbytes * frac * mult
    ring_steps = (n - 1.0) * mult
    inter_f = inter.astype(np.float64)
    # ring (hierarchical: NVLink hops inside the node, one NIC hop per node boundary)
    t_ring_bw = vol / np.where(inter, np.minimum(nvl, nic_node), nvl)
    lat0 = np.where(inter, p.hop, NVLINK_HOP_S)
    if kind == "ar":
        depth = np.log2(np.maximum(nodes, 2.0))
        t_tree_bw = vol / (np.minimum(nvl, nic_node) * TREE_BW_EFF)
        tree_lat0 = 2.0 * (depth * p.hop + (k - 1.0) * NVLINK_HOP_S)
        tree_steps = 2.0 * (depth + (k - 1.0))
    else:
        pat_ok = inter & (k <= 1.0)
        pat_steps = np.log2(np.maximum(n, 2.0))
    for eff, base, net_extra, nvl_extra in PROTOCOLS.values():
        extra = nvl_extra + inter_f * (net_extra - nvl_extra)
        best = np.minimum(best, base + ring_steps * (lat0 + extra) + t_ring_bw / eff)
        if kind == "ar":
            # double binary tree across nodes, chain inside: depth log2(nodes), up and down
            t_tree = base + tree_lat0 + tree_steps * extra + t_tree_bw / eff
            best = np.where(inter, np.minimum(best, t_tree), best)
            if net.sharp:
                # CollNet / SHARP: reduce inside the node (NVLS or ring), then the switch reduces: each byte
                # leaves the node once and returns once -> nbytes over the node's NICs each way
                t_sharp = (base + 2.0 * (2.0 * p.hop + (k - 1.0) * NVLINK_HOP_S)
                           + nbytes / (nic_node * eff) + nbytes * (k - 1.0) / k / nvl)
                best = np.where(inter, np.minimum(best, t_sharp), best)
        elif eff == 1.0:
            # PAT (ag/rs, one rank per node, Simple only): log2(n) steps, same bus volume as the ring
            t_pat = base + pat_steps * (p.hop + net_extra) + vol / nic_node
            best = np.where(pat_ok, np.minimum(best, t_pat), best)
    return np.where(n > 1.0, best, 0.0)


def moe_a2a(net: Net, tokens: Arr, per_token_bytes: float, top_k: float, n: Arr, stride: Arr,
            pl: Placement | None = None) -> Arr:
    """One MoE token all-to-all (dispatch or combine), deduplicated per destination node.

    Each token picks ``top_k`` experts spread evenly over ``n`` EP ranks (``k`` per node, ``N = n/k``
    nodes). It is sent once per distinct remote node over the NIC and forwarded over NVLink inside it:
    expected copies per token (N-1)(1-(1-1/N)^top_k) over the NIC and N(k-1)(1-(1-1/n)^top_k) over NVLink,
    the two phases concurrent (DeepEP's NVLink+RDMA forwarding; DeepSeek-V3 Sec. 3.2).
    """
    n = np.maximum(n, 1.0)
    p = pl if pl is not None else place(net, n, stride)
    k, nodes = p.k, p.nodes
    hit_node = 1.0 - (1.0 - 1.0 / nodes) ** top_k
    hit_gpu = 1.0 - (1.0 - 1.0 / n) ** top_k
    t_net = tokens * per_token_bytes * (nodes - 1.0) * hit_node / (net.nic_bw_gpu * p.share * _scale(net, "a2a"))
    t_nvl = tokens * per_token_bytes * nodes * (k - 1.0) * hit_gpu / net.nvl_ring
    inter = nodes > 1.0
    lat = np.where(inter, p.hop * np.log2(np.maximum(nodes, 2.0)), NVLINK_HOP_S) + (n - 1.0) * 0.1e-6
    return np.where(n > 1.0, np.maximum(t_net, t_nvl) + lat, 0.0)


def p2p(net: Net, nbytes: Arr, stride: Arr) -> Arr:
    """Pipeline send/recv between ranks ``stride`` GPUs apart (one NIC each when in different nodes)."""
    inter = stride >= net.domain
    two = np.full_like(stride, 2.0)
    p = place(net, two, np.maximum(stride, 1.0))
    # a stage boundary crosses the leaf when the next stage's node is in another leaf
    t_net = nbytes / (net.nic_bw_gpu * p.share * _scale(net, "p2p")) + p.hop + PROTOCOLS["Simple"][1]
    t_nvl = nbytes / net.nvl_ring + NVLINK_HOP_S
    return np.where(inter, t_net, t_nvl)


def on_nic(pl: Placement) -> Arr:
    """1.0 where a group's traffic leaves the NVLink domain (uses the NICs)."""
    return (pl.nodes > 1.0).astype(np.float64)
