"""NCCL's choice: the cheapest algorithm x protocol for one collective (src/graph/tuning.cc's structure).

Algorithms (one module each, the interface in :mod:`.bus`): ring, NVLS, tree, CollNet/SHARP, PAT, all-to-all;
the point-to-point transfer (p2p.py) and the MoE token dispatch (moe_dispatch.py) are timed directly.
The minimum over them gives the latency-to-bandwidth ramp of nccl-tests curves: latency-bound below ~64 KiB,
half bandwidth around 1-4 MiB across nodes, within a few percent of bus bandwidth above 256 MiB.
"""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.alltoall import ALLTOALL
from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.collnet import COLLNET
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.nvls import NVLS
from engine.performance.collectives.pat import PAT
from engine.performance.collectives.placement import Net, Placement, place
from engine.performance.collectives.ring import RING
from engine.performance.collectives.tree import TREE
from engine.units import Bytes, Count, Seconds

ALGORITHMS = (RING, NVLS, TREE, COLLNET, PAT, ALLTOALL)


def collective_time(net: Net, kind: CollectiveKind, nbytes: Bytes, n: Count, stride: Count,
                    pl: Placement | None = None) -> Seconds:
    """Time of one collective of ``kind`` over ``n`` ranks spaced ``stride`` GPUs apart; ``nbytes`` = full buffer
    per rank (reduced tensor for ar/rs, gathered output for ag, send buffer for a2a). ``pl``: the group's
    placement when the caller already has it (``place(net, n, stride)``)."""
    bus = make_bus(net, kind, nbytes, n, pl if pl is not None else place(net, n, stride))
    # issue #22: an algorithm NCCL had not released at the scenario's framework release is not a choice
    times = [alg.time(bus) for alg in ALGORITHMS
             if alg.applies(net, kind) and alg.name not in net.unreleased_algorithms]
    best = times[0] if times else np.full_like(bus.n, np.inf)
    for t in times[1:]:
        best = np.minimum(best, t)
    return np.where(bus.n > 1.0, best, 0.0)
