"""PAT (collectives/pat.py): one rank per node, log2(n) steps of the Simple protocol."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.pat import pat_time
from engine.performance.collectives.placement import place
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def _pat(n: float, stride: float, nbytes: float = 1e6) -> float:
    nn = np.array([n])
    bus = make_bus(NET, CollectiveKind.ALL_GATHER, np.array([nbytes]), nn, place(NET, nn, np.array([stride])))
    return float(pat_time(bus)[0])


def test_pat_all_gather_over_four_nodes_one_rank_each() -> None:
    """9 us + log2(4) x (hop + 2 us) + 3/4 x B / 25 GB/s (one NIC per node)."""
    expected = 9e-6 + math.log2(4) * (IB_HOP_1_SWITCH + 2e-6) + 3 / 4 * 1e6 / 25e9
    assert _pat(4, 8) == pytest.approx(expected, rel=1e-12)


def test_pat_needs_one_rank_per_node() -> None:
    assert _pat(16, 2) == np.inf and _pat(8, 1) == np.inf
