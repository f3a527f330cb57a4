"""Tree: NCCL's double binary tree across NVLink domains, a chain inside each (all-reduce, more than one domain).

Depth log2(N) over N domains, reduce up and broadcast down; bus bandwidth the ring's times ``TREE_BW_EFF``.
Inside the domain the chain reduces over NVLS where the GPU has it (NCCL's NVLS-tree).
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.bus import Algorithm, Bus, cheapest, reduction_nvlink_bw
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, Net
from engine.units import Seconds

# NCCL's tree all-reduce reaches a lower fraction of the ring's bus bandwidth (pipelining over a depth-log2
# tree with chains inside the node): about 0.85-0.9 in nccl-tests at 2-16 nodes.
TREE_BW_EFF = 0.87
# A tree all-reduce runs twice through the tree: reduce towards the root, broadcast back down.
TREE_PHASES = 2.0
# A tree spans at least two domains (it applies only across domains): depth >= log2(2) = 1.
MIN_TREE_NODES = 2.0


def tree_time(bus: Bus) -> Seconds:
    pl = bus.pl
    depth = np.log2(np.maximum(pl.nodes, MIN_TREE_NODES))
    t_bw = bus.volume_bytes / (np.minimum(reduction_nvlink_bw(bus), bus.nic_node) * TREE_BW_EFF)
    lat0 = TREE_PHASES * (depth * pl.hop + (pl.k - 1.0) * NVLINK_HOP_S)
    steps = TREE_PHASES * (depth + (pl.k - 1.0))
    t = cheapest(lambda p: p.base_s + lat0 + steps * bus.step_extra_s[p.name] + t_bw / p.bw_fraction)
    return np.where(bus.inter, t, np.inf)


def tree_applies(net: Net, kind: CollectiveKind) -> bool:
    return kind == CollectiveKind.ALL_REDUCE


TREE = Algorithm(name="tree", time=tree_time, applies=tree_applies)
