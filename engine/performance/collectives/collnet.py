"""CollNet / SHARP: all-reduce reduced in the InfiniBand switches (``cluster.in_network_reduction``).

Reduce inside the node (NVLS or ring), then the switch reduces: each byte leaves the node once and returns once,
i.e. ``nbytes`` over the node's NICs each way instead of 2(n-1)/n of it; two network hops each way (NIC to the
reducing switch and back). Needs NCCL's CollNet plugin and SHARP switches; on only when the scenario says so.
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.bus import Algorithm, Bus, cheapest, reduction_nvlink_bw
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, Net
from engine.units import Seconds

COLLNET_PHASES = 2.0  # up to the reducing switch, back down
COLLNET_NET_HOPS = 2.0  # network hops per phase


def collnet_time(bus: Bus) -> Seconds:
    pl = bus.pl
    k = pl.k
    lat = COLLNET_PHASES * (COLLNET_NET_HOPS * pl.hop + (k - 1.0) * NVLINK_HOP_S)
    t_nvl = bus.nbytes * (k - 1.0) / k / reduction_nvlink_bw(bus)
    t = cheapest(lambda p: p.base_s + lat + bus.nbytes / (bus.nic_node * p.bw_fraction) + t_nvl)
    return np.where(bus.inter, t, np.inf)


def collnet_applies(net: Net, kind: CollectiveKind) -> bool:
    return kind == CollectiveKind.ALL_REDUCE and net.sharp


COLLNET = Algorithm(name="collnet", time=collnet_time, applies=collnet_applies)
