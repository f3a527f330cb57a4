"""MoE token dispatch (collectives/moe_dispatch.py): one copy per distinct destination node over the NIC."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.performance.collectives.moe_dispatch import moe_alltoall_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def test_dispatch_deduplicates_per_destination_node() -> None:
    """EP 32 over 4 nodes, top-8: (N-1)(1-(1-1/N)^8) NIC copies and N(k-1)(1-(1-1/n)^8) NVLink copies per token."""
    tokens, per_token, top_k, n, nodes, k = 4096.0, 7168.0, 8.0, 32.0, 4.0, 8.0
    nic = (nodes - 1) * (1 - (1 - 1 / nodes) ** top_k)
    nvl = nodes * (k - 1) * (1 - (1 - 1 / n) ** top_k)
    expected = (max(tokens * per_token * nic / 25e9, tokens * per_token * nvl / 360e9)
                + IB_HOP_1_SWITCH * math.log2(nodes) + (n - 1) * 0.1e-6)
    t = moe_alltoall_time(NET, np.array([tokens]), per_token, top_k, np.array([n]), np.array([1.0]))
    assert t[0] == pytest.approx(expected, rel=1e-12)
    assert nic == pytest.approx(2.7, abs=0.05)  # vs 8 x 3/4 = 6 copies if every routed copy were sent


def test_one_expert_per_token_is_the_plain_alltoall_volume() -> None:
    """top_k = 1: (N-1)/N of the tokens leave the node."""
    t = moe_alltoall_time(NET, np.array([1e6]), 1000.0, 1.0, np.array([32.0]), np.array([1.0]))
    expected = 1e6 * 1000 * 3 / 4 / 25e9 + IB_HOP_1_SWITCH * 2 + 31 * 0.1e-6
    assert t[0] == pytest.approx(expected, rel=1e-12)
