"""All-to-all: each rank sends (k-1)/n of its buffer over NVLink and (n-k)/n over its own NIC, concurrently.

Alltoall cannot aggregate several NICs (nccl-tests #267): each rank's inter-node share goes through its own NIC.
Latency: log2(N) network hops across N domains (one NVLink hop inside one) plus a per-peer cost.
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.bus import Algorithm, Bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, Net, Placement
from engine.performance.collectives.protocols import SIMPLE
from engine.units import BoolArr, Count, Seconds

# Per-peer cost of an all-to-all: NCCL runs it as grouped send/recv, one pair per peer, each a work-queue
# element its proxy thread progresses. No published measurement isolates it; 0.1 us per peer is an assumption
# of the order of one work element, small next to the hop latency below ~100 peers (64 ranks: 6 us).
A2A_PER_PEER_S = 0.1e-6
MIN_A2A_NODES = 2.0  # log2 of at least two domains: one network hop


def alltoall_latency(pl: Placement, n: Count, inter: BoolArr) -> Seconds:
    """Latency of one all-to-all over ``n`` ranks placed as ``pl`` (shared with the MoE token dispatch)."""
    hops = np.where(inter, pl.hop * np.log2(np.maximum(pl.nodes, MIN_A2A_NODES)), NVLINK_HOP_S)
    return hops + (n - 1.0) * A2A_PER_PEER_S


def alltoall_time(bus: Bus) -> Seconds:
    """Simple protocol (bulk send/recv)."""
    pl, n, net = bus.pl, bus.n, bus.net
    t_nvl = bus.nbytes * (pl.k - 1.0) / n / net.nvl_ring
    t_net = bus.nbytes * (n - pl.k) / n / (net.nic_bw_gpu * pl.share * net.bw_scale(CollectiveKind.ALL_TO_ALL))
    return np.maximum(t_nvl, t_net) + alltoall_latency(pl, n, bus.inter) + SIMPLE.base_s


def alltoall_applies(net: Net, kind: CollectiveKind) -> bool:
    return kind == CollectiveKind.ALL_TO_ALL


ALLTOALL = Algorithm(name="alltoall", time=alltoall_time, applies=alltoall_applies)
