"""Tree (collectives/tree.py): NCCL's double binary tree across nodes, chains inside, at 0.87 of the ring's bus
bandwidth: base + 2 (log2 N hop + (k-1) NVLink hop) + 2 (log2 N + k - 1) extra + bytes / (bw 0.87 eff)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.performance.collectives.bus import make_bus
from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import place
from engine.performance.collectives.tree import tree_time
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET, NVLINK_HOP, PROTOCOLS


def _bus(n: float, nbytes: float):
    nn = np.array([n])
    return make_bus(NET, CollectiveKind.ALL_REDUCE, np.array([nbytes]), nn, place(NET, nn, np.array([1.0])))


def test_tree_all_reduce_over_four_nodes() -> None:
    """4 nodes of 8 under one leaf: depth 2; NVLS inside the node (480 GB/s) vs 8 NICs (200 GB/s): 200 binds."""
    n, nbytes, k, depth = 32, 1e9, 8, math.log2(4)
    vol = 2 * (n - 1) / n * nbytes
    expected = min(base + 2 * (depth * IB_HOP_1_SWITCH + (k - 1) * NVLINK_HOP) + 2 * (depth + k - 1) * net
                   + vol / (200e9 * 0.87) / eff for eff, base, net, _ in PROTOCOLS)
    assert tree_time(_bus(n, nbytes))[0] == pytest.approx(expected, rel=1e-12)


def test_no_tree_inside_one_node() -> None:
    assert tree_time(_bus(8, 1e6))[0] == np.inf
