"""All-to-all (collectives/alltoall.py): NVLink and NIC shares concurrent, log2 N hops, 0.1 us per peer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.tuning import collective_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def test_alltoall_over_four_nodes() -> None:
    """32 ranks, 8 per node: each rank sends 7/32 of its buffer over NVLink and 24/32 over its own NIC."""
    n, k, nbytes = 32, 8, 1e8
    t_nvl = nbytes * (k - 1) / n / 360e9
    t_net = nbytes * (n - k) / n / 25e9
    expected = max(t_nvl, t_net) + IB_HOP_1_SWITCH * math.log2(4) + (n - 1) * 0.1e-6 + 9e-6
    t = collective_time(NET, CollectiveKind.ALL_TO_ALL, np.array([nbytes]), np.array([32.0]), np.array([1.0]))
    assert t[0] == pytest.approx(expected, rel=1e-12)
