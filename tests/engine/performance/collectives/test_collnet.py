"""CollNet / SHARP (collectives/collnet.py): each byte leaves the node once and comes back once."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.collnet import collnet_applies, collnet_time
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import place
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET, NVLINK_HOP, PROTOCOLS, SHARP


def test_in_network_all_reduce_sends_the_buffer_once_over_the_nics() -> None:
    """base + 2 x (2 network hops + 7 NVLink hops) + B / (8 NICs x 25 GB/s x eff) + B (k-1)/k / NVLS."""
    n, nbytes, k = 32.0, 1e9, 8
    nn = np.array([n])
    bus = make_bus(SHARP, CollectiveKind.ALL_REDUCE, np.array([nbytes]), nn, place(SHARP, nn, np.array([1.0])))
    expected = min(base + 2 * (2 * IB_HOP_1_SWITCH + (k - 1) * NVLINK_HOP) + nbytes / (200e9 * eff)
                   + nbytes * (k - 1) / k / 480e9 for eff, base, _, _ in PROTOCOLS)
    assert collnet_time(bus)[0] == pytest.approx(expected, rel=1e-12)


def test_only_with_in_network_reduction_and_only_all_reduce() -> None:
    assert collnet_applies(SHARP, CollectiveKind.ALL_REDUCE)
    assert not collnet_applies(NET, CollectiveKind.ALL_REDUCE)
    assert not collnet_applies(SHARP, CollectiveKind.ALL_GATHER)
