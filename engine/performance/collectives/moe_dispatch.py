"""MoE token dispatch / combine: an all-to-all deduplicated per destination node.

Each token picks ``top_k`` experts spread evenly over ``n`` EP ranks (``k`` per node, ``N = n/k`` nodes). It is
sent once per distinct remote node over the NIC and forwarded over NVLink inside it: expected copies per token
(N-1)(1-(1-1/N)^top_k) over the NIC and N(k-1)(1-(1-1/n)^top_k) over NVLink, the two phases concurrent
(DeepEP's NVLink+RDMA forwarding; DeepSeek-V3 Sec. 3.2). top_k = 1 gives the plain all-to-all volume.
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.alltoall import alltoall_latency
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import Net, Placement, place
from engine.units import Count, Ratio, Seconds


def node_hit_probability(nodes: Count, top_k: float) -> Ratio:
    """Probability that a given other node holds at least one of a token's ``top_k`` experts."""
    return 1.0 - (1.0 - 1.0 / nodes) ** top_k


def moe_alltoall_time(net: Net, tokens: Count, per_token_bytes: float, top_k: float, n: Count, stride: Count,
                      pl: Placement | None = None) -> Seconds:
    """Time of one MoE token all-to-all (dispatch or combine) of ``tokens`` tokens per rank."""
    n = np.maximum(n, 1.0)
    p = pl if pl is not None else place(net, n, stride)
    k, nodes = p.k, p.nodes
    hit_node = node_hit_probability(nodes, top_k)
    hit_gpu = node_hit_probability(n, top_k)
    t_net = (tokens * per_token_bytes * (nodes - 1.0) * hit_node
             / (net.nic_bw_gpu * p.share * net.bw_scale(CollectiveKind.ALL_TO_ALL)))
    t_nvl = tokens * per_token_bytes * nodes * (k - 1.0) * hit_gpu / net.nvl_ring
    lat = alltoall_latency(p, n, np.asarray(nodes > 1.0))
    return np.where(n > 1.0, np.maximum(t_net, t_nvl) + lat, 0.0)
