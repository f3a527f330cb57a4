"""Point-to-point send/recv (pipeline stages): one NIC each way between nodes, NVLink inside one."""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, PAIR_RANKS, Net, place
from engine.performance.collectives.protocols import SIMPLE
from engine.units import Bytes, Count, Seconds


def p2p_time(net: Net, nbytes: Bytes, stride: Count) -> Seconds:
    """One transfer of ``nbytes`` between ranks ``stride`` GPUs apart (in different domains when stride >= domain);
    a stage boundary crosses the leaf when the next stage's node is in another leaf (the pair's placement)."""
    inter = stride >= net.domain
    p = place(net, np.full_like(stride, PAIR_RANKS), np.maximum(stride, 1.0))
    t_net = nbytes / (net.nic_bw_gpu * p.share * net.bw_scale(CollectiveKind.P2P)) + p.hop + SIMPLE.base_s
    t_nvl = nbytes / net.nvl_ring + NVLINK_HOP_S
    return np.where(inter, t_net, t_nvl)
