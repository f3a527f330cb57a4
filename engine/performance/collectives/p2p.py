"""Point-to-point send/recv (pipeline stages): one NIC each way between nodes, NVLink inside one."""

from __future__ import annotations

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import NVLINK_HOP_S, PAIR_RANKS, Net, place
from engine.performance.collectives.protocols import SIMPLE
from engine.units import Bytes, Count, Ratio, Seconds


def boundary_nic_share(net: Net, senders: Count) -> Ratio:
    """NIC bandwidth of one sender at a stage boundary between nodes, in units of ``net.nic_bw_gpu`` [1].

    ``net.nic_bw_gpu`` is a node's NIC line rate spread over all its GPUs, right when every GPU of the node sends
    across (DP rings, pipeline neighbours a node or more apart). At a boundary inside a run of stages narrower than a
    node (stage width s < D GPUs), only the s GPUs of the node's last stage send out of it. Adjacent GPUs attach to
    the same NIC (PCIe switch pairs, NCCL's nearest-NIC choice), ``g = gpus_per_nic`` of them per NIC, so the s
    senders use max(1, s / g) NICs and each gets max(nic_bw_gpu, NIC rate / s) = nic_bw_gpu x max(1, g / s): x 2
    for 4 senders on one NIC per 8 GPUs, x 1 on a rail-optimised node (one NIC per GPU).
    """
    return np.maximum(1.0, net.gpus_per_nic / np.maximum(senders, 1.0))


def p2p_time(net: Net, nbytes: Bytes, stride: Count, senders: Count | None = None) -> Seconds:
    """One transfer of ``nbytes`` between ranks ``stride`` GPUs apart (in different domains when stride >= domain);
    a stage boundary crosses the leaf when the next stage's node is in another leaf (the pair's placement).
    ``senders``: GPUs of the node that send across at once (default every GPU: :func:`boundary_nic_share`)."""
    inter = stride >= net.domain
    p = place(net, np.full_like(stride, PAIR_RANKS), np.maximum(stride, 1.0))
    share = 1.0 if senders is None else boundary_nic_share(net, senders)
    t_net = nbytes / (net.nic_bw_gpu * share * p.share * net.bw_scale(CollectiveKind.P2P)) + p.hop + SIMPLE.base_s
    t_nvl = nbytes / net.nvl_ring + NVLINK_HOP_S
    return np.where(inter, t_net, t_nvl)
