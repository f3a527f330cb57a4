"""The one interface every collective algorithm implements.

An algorithm is a function ``time(bus) -> Seconds``: the time of one collective described by ``bus`` (what is
moved, over which group, at which bandwidths) under the cheapest of the NCCL protocols the algorithm runs, ``inf``
where the algorithm does not apply (e.g. a tree inside one node). :func:`engine.performance.collectives.tuning.
collective_time` takes the minimum over the algorithms that implement the collective's kind, as NCCL's tuner does
(src/graph/tuning.cc: time = base latency + steps x hop latency + bytes / bus bandwidth, per algorithm and
protocol).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import ALL_REDUCE_PHASES, CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, Net, Placement
from engine.performance.collectives.protocols import PROTOCOLS, NcclProtocol
from engine.units import BoolArr, Bytes, BytesPerSecond, Count, Seconds


@dataclass(frozen=True)
class Bus:
    """One collective over one group (arrays over layouts)."""

    net: Net
    kind: CollectiveKind
    nbytes: Bytes  # full buffer per rank: reduced tensor (ar, rs), gathered output (ag), send buffer (a2a)
    n: Count  # ranks in the group (>= 1)
    pl: Placement
    inter: BoolArr  # the group spans more than one NVLink domain
    volume_bytes: Bytes  # bytes each rank moves: (n-1)/n of nbytes, twice for all-reduce
    ring_steps: Count  # (n-1), twice for all-reduce
    nic_node: BytesPerSecond  # a node's aggregate NIC rate for the group (k NICs x routing share x calibration)
    nic_node_ring: BytesPerSecond  # the same for a ring's neighbour traffic (Placement.share_ring)
    first_hop_s: Seconds  # latency of one ring step: network hop across domains, NVLink hop inside one
    step_extra_s: Mapping[str, Seconds]  # per protocol name: its extra latency per step (network or NVLink figure)


@dataclass(frozen=True)
class Algorithm:
    name: str
    time: Callable[[Bus], Seconds]
    applies: Callable[[Net, CollectiveKind], bool]  # to this kind on this cluster (NVLS: all-reduce, NVSwitch reduces)


def make_bus(net: Net, kind: CollectiveKind, nbytes: Bytes, n: Count, pl: Placement) -> Bus:
    n = np.maximum(n, 1.0)
    inter = np.asarray(pl.nodes > 1.0)
    frac = np.where(n > 1, (n - 1.0) / n, 0.0)
    mult = ALL_REDUCE_PHASES if kind == CollectiveKind.ALL_REDUCE else 1.0
    inter_f = inter.astype(np.float64)
    # the protocol's extra latency per step: its network-hop figure across domains, its NVLink one inside
    extra = {p.name: p.nvlink_hop_s + inter_f * (p.net_hop_s - p.nvlink_hop_s) for p in PROTOCOLS}
    nic_node = pl.k * net.nic_bw_gpu * pl.share * net.bw_scale(kind)
    nic_ring = nic_node if pl.share_ring is pl.share else pl.k * net.nic_bw_gpu * pl.share_ring * net.bw_scale(kind)
    return Bus(net=net, kind=kind, nbytes=nbytes, n=n, pl=pl, inter=inter, volume_bytes=nbytes * frac * mult,
               ring_steps=(n - 1.0) * mult, nic_node=nic_node, nic_node_ring=nic_ring,
               first_hop_s=np.where(inter, pl.hop, NVLINK_HOP_S), step_extra_s=extra)


def ring_schedule_time(bus: Bus, nvlink_bw: float) -> Seconds:
    """A (hierarchical) ring under its cheapest protocol: NVLink hops inside the domain, one NIC hop per domain
    boundary; its bus bandwidth is the smaller of the NVLink bus bandwidth and the node's aggregate NIC rate.
    Shared by the ring and NVLS."""
    t_bw = bus.volume_bytes / np.where(bus.inter, np.minimum(nvlink_bw, bus.nic_node_ring), nvlink_bw)
    return cheapest(lambda p: p.base_s + bus.ring_steps * (bus.first_hop_s + bus.step_extra_s[p.name])
                    + t_bw / p.bw_fraction)


def cheapest(time: Callable[[NcclProtocol], Seconds], protocols: tuple[NcclProtocol, ...] = PROTOCOLS) -> Seconds:
    """The minimum of ``time`` over ``protocols``."""
    best = time(protocols[0])
    for proto in protocols[1:]:
        best = np.minimum(best, time(proto))
    return best


def reduction_nvlink_bw(bus: Bus) -> float:
    """NVLink bus bandwidth of a reduction inside the domain: NVLS (the NVSwitch reduces) where the GPU has it."""
    return bus.net.nvl_ar if (bus.kind == CollectiveKind.ALL_REDUCE and bus.net.nvls) else bus.net.nvl_ring
