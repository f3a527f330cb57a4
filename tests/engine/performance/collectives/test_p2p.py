"""Point-to-point (collectives/p2p.py)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from engine.performance.collectives.p2p import p2p_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def test_between_nodes_one_nic_and_one_hop_inside_a_node_nvlink() -> None:
    nbytes = 1e7
    assert p2p_time(NET, np.array([nbytes]), np.array([8.0]))[0] == pytest.approx(
        nbytes / 25e9 + IB_HOP_1_SWITCH + 9e-6, rel=1e-12)
    assert p2p_time(NET, np.array([nbytes]), np.array([2.0]))[0] == pytest.approx(nbytes / 360e9 + 1e-6, rel=1e-12)


def test_a_narrow_boundary_on_a_shared_nic_gets_the_nic_over_its_senders() -> None:
    """One 200 Gb/s-class NIC per 8 GPUs (nic_bw_gpu = NIC / 8 = 25e9 B/s here): where only 4 GPUs of a node send
    across (a stage boundary of a run of 4-GPU stages), each gets NIC / 4 = 2 x 25e9; all 8 sending, 25e9. On a
    rail-optimised node (one NIC per GPU) 4 senders still get their own NIC, 25e9."""
    nbytes = 1e7
    one_nic = dataclasses.replace(NET, gpus_per_nic=8.0)
    stride = np.array([8.0])
    base = IB_HOP_1_SWITCH + 9e-6
    assert p2p_time(one_nic, np.array([nbytes]), stride, np.array([4.0]))[0] == pytest.approx(
        nbytes / (2.0 * 25e9) + base, rel=1e-12)
    assert p2p_time(one_nic, np.array([nbytes]), stride, np.array([8.0]))[0] == pytest.approx(
        nbytes / 25e9 + base, rel=1e-12)
    assert p2p_time(NET, np.array([nbytes]), stride, np.array([4.0]))[0] == pytest.approx(
        nbytes / 25e9 + base, rel=1e-12)


@pytest.mark.parametrize("senders", [1.0, 2.0, 4.0, 8.0])
def test_more_nics_per_node_never_slow_a_boundary(senders: float) -> None:
    """Node NIC bandwidth B over nics NICs of B / nics each (nic_bw_gpu = B / 8): 1, 2, 4, 8 NICs of one line rate
    r = 200e9/8 B/s: the per-sender rate max(B / 8, r / senders) never falls as NICs are added."""
    r = 25e9
    times = []
    for nics in (1.0, 2.0, 4.0, 8.0):
        net = dataclasses.replace(NET, nic_bw_gpu=nics * r / 8.0, gpus_per_nic=8.0 / nics)
        times.append(p2p_time(net, np.array([1e8]), np.array([8.0]), np.array([senders]))[0])
    assert all(b <= a * (1 + 1e-12) for a, b in itertools.pairwise(times))
    assert times[-1] == pytest.approx(1e8 / r + IB_HOP_1_SWITCH + 9e-6, rel=1e-12)
