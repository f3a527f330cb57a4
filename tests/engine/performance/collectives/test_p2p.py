"""Point-to-point (collectives/p2p.py)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.performance.collectives.p2p import p2p_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def test_between_nodes_one_nic_and_one_hop_inside_a_node_nvlink() -> None:
    nbytes = 1e7
    assert p2p_time(NET, np.array([nbytes]), np.array([8.0]))[0] == pytest.approx(
        nbytes / 25e9 + IB_HOP_1_SWITCH + 9e-6, rel=1e-12)
    assert p2p_time(NET, np.array([nbytes]), np.array([2.0]))[0] == pytest.approx(nbytes / 360e9 + 1e-6, rel=1e-12)
