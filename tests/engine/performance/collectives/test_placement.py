"""Where a group sits on the fabric (collectives/placement.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import cross_fraction, on_nic, place, place_nested
from tests.engine.performance.collectives._net import IB_HOP_1_SWITCH, NET


def test_ranks_per_domain_and_domains_spanned() -> None:
    """k = clip(D / stride, 1, n): 16 ranks of stride 2 on 8-GPU nodes: 4 per node over 4 nodes."""
    pl = place(NET, np.array([16.0]), np.array([2.0]))
    assert pl.k[0] == 4 and pl.nodes[0] == 4
    assert on_nic(pl)[0]
    inside = place(NET, np.array([8.0]), np.array([1.0]))
    assert inside.k[0] == 8 and inside.nodes[0] == 1 and not on_nic(inside)[0]


def test_a_peer_leaves_the_leaf_with_probability_1_minus_m_minus_1_over_n_minus_1() -> None:
    """16 nodes, 4 per leaf: a ring neighbour is outside the leaf with probability 1 - 3/15; the hop then crosses
    3 switches: 2.35 + 3 x 0.45 us."""
    assert cross_fraction(np.array([4.0]), np.array([16.0]))[0] == pytest.approx(1 - 3 / 15)
    pl = place(NET, np.array([16.0]), np.array([8.0]))
    assert pl.f_leaf[0] == pytest.approx(1 - 3 / 15)
    assert pl.hop[0] == pytest.approx(2.35e-6 + 3 * 0.45e-6)
    two = place(NET, np.array([2.0]), np.array([8.0]))  # both nodes under one leaf
    assert two.f_leaf[0] == 0.0 and two.hop[0] == pytest.approx(IB_HOP_1_SWITCH)


def test_calibration_replaces_the_hop_latency_and_scales_bandwidth_per_kind() -> None:
    net = dataclasses.replace(NET, alpha_override=7e-6, bw_scale_ag=0.5)
    assert place(net, np.array([16.0]), np.array([8.0])).hop[0] == 7e-6
    assert net.bw_scale(CollectiveKind.ALL_GATHER) == 0.5 and net.bw_scale(CollectiveKind.ALL_REDUCE) == 1.0


def test_nested_placement_multiplies_ranks_per_domain_and_reduces_to_place() -> None:
    """DP x CP with DP outermost: 2 CP ranks 2 apart in each of 4 blocks 8 apart -> k = 2 x 1, 4 nodes, spread
    over 4 x 8 / 8 = 4 nodes; with one rank per block it is ``place`` of the blocks."""
    pl = place_nested(NET, np.array([2.0]), np.array([2.0]), np.array([4.0]), np.array([8.0]))
    assert (pl.k[0], pl.nodes[0]) == (2, 4)
    one, flat = (place_nested(NET, np.array([1.0]), np.array([1.0]), np.array([16.0]), np.array([8.0])),
                 place(NET, np.array([16.0]), np.array([8.0])))
    assert all(np.array_equal(getattr(one, f.name), getattr(flat, f.name)) for f in dataclasses.fields(flat))
