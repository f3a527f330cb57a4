"""Ring (collectives/ring.py) against NCCL's ring cost written out: base + steps x (hop + protocol extra) +
bus bytes / (bus bandwidth x protocol fraction), the cheapest protocol."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import place
from engine.performance.collectives.ring import ring_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET, NVLINK_HOP, PROTOCOLS


def _ring(kind: CollectiveKind, nbytes: float, n: float, stride: float = 1.0) -> float:
    nn, st = np.array([n]), np.array([stride])
    return float(ring_time(make_bus(NET, kind, np.array([nbytes]), nn, place(NET, nn, st)))[0])


@pytest.mark.parametrize("nbytes", [1e3, 1e6, 1e9])
def test_all_gather_inside_a_node_is_an_nvlink_ring(nbytes: float) -> None:
    n = 8
    expected = min(base + (n - 1) * (NVLINK_HOP + nvl) + (n - 1) / n * nbytes / 360e9 / eff
                   for eff, base, _, nvl in PROTOCOLS)
    assert _ring(CollectiveKind.ALL_GATHER, nbytes, n) == pytest.approx(expected, rel=1e-12)


def test_all_reduce_ring_moves_the_buffer_twice_in_twice_the_steps() -> None:
    n, nbytes = 8, 1e9
    expected = min(base + 2 * (n - 1) * (NVLINK_HOP + nvl) + 2 * (n - 1) / n * nbytes / 360e9 / eff
                   for eff, base, _, nvl in PROTOCOLS)
    assert _ring(CollectiveKind.ALL_REDUCE, nbytes, n) == pytest.approx(expected, rel=1e-12)


def test_across_nodes_the_ring_runs_at_the_nodes_aggregate_nic_rate() -> None:
    """2 nodes of 8 ranks under one leaf: bus bandwidth min(NVLink 360, 8 x 25 GB/s) = 200 GB/s; every step
    costs the network hop (1 switch) plus the protocol's network extra."""
    n, nbytes = 16, 1e9
    expected = min(base + (n - 1) * (IB_HOP_1_SWITCH + net) + (n - 1) / n * nbytes / 200e9 / eff
                   for eff, base, net, _ in PROTOCOLS)
    assert _ring(CollectiveKind.REDUCE_SCATTER, nbytes, n) == pytest.approx(expected, rel=1e-12)
