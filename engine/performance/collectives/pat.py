"""PAT (NCCL >= 2.23): all-gather / reduce-scatter with one rank per node in log2(n) steps instead of n-1.

Same bus volume as the ring, Simple protocol only; applies when the group spans domains with one rank in each.
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.bus import Algorithm, Bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import Net
from engine.performance.collectives.protocols import SIMPLE
from engine.units import Seconds

MIN_PAT_RANKS = 2.0  # log2 of at least two ranks: one step


def pat_time(bus: Bus) -> Seconds:
    pl = bus.pl
    steps = np.log2(np.maximum(bus.n, MIN_PAT_RANKS))
    t = SIMPLE.base_s + steps * (pl.hop + SIMPLE.net_hop_s) + bus.volume_bytes / bus.nic_node
    return np.where(bus.inter & (pl.k <= 1.0), t, np.inf)


def pat_applies(net: Net, kind: CollectiveKind) -> bool:
    return kind in (CollectiveKind.ALL_GATHER, CollectiveKind.REDUCE_SCATTER)


PAT = Algorithm(name="pat", time=pat_time, applies=pat_applies)
