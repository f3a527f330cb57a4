"""Where a group sits on the fabric (collectives/placement.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import (
    cross_fraction,
    on_nic,
    place,
    place_nested,
    ring_cross_fraction,
)
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


def test_a_ring_in_switch_order_leaves_each_block_once() -> None:
    """Ranks in leaf order (cluster.rank_assignment topology-aware): 16 nodes in blocks of 4 under a leaf form 4
    blocks, and the ring leaves each once: 4 of its 16 edges (1/m) cross, against 1 - 3/15 of a rank's peers when
    the order is arbitrary. 128 nodes, 24 per pod: ceil(128/24) = 6 blocks, 6/128. One block holds the group: none.
    One node per block: every edge, as unaligned. 10 nodes, 9 in one leaf: the ring crosses 2 of 10 edges, more
    than the unaligned 1/9, so the aligned figure is capped there (an order by switch is never worse)."""
    assert ring_cross_fraction(np.array([4.0]), np.array([16.0]))[0] == pytest.approx(4 / 16)
    assert ring_cross_fraction(np.array([24.0]), np.array([128.0]))[0] == pytest.approx(6 / 128)
    assert ring_cross_fraction(np.array([16.0]), np.array([16.0]))[0] == 0.0
    assert ring_cross_fraction(np.array([1.0]), np.array([16.0]))[0] == pytest.approx(1.0)
    assert ring_cross_fraction(np.array([9.0]), np.array([10.0]))[0] == pytest.approx(1 / 9)


def test_rank_assignment_moves_only_the_ring_share() -> None:
    """16 nodes, 4 per leaf, 1:4 above the leaves (hashed routing): the unaligned share is that of load
    (1 - 3/15) x 4; in switch order the ring's is that of load 1/4 x 4 = 1; the peer-uniform share (all-to-all,
    PAT, tree) does not move."""
    from engine.fabric.routing import CHANNELS_PER_NIC, crossing_share

    net = dataclasses.replace(NET, oversub_leaf=4.0, routing="ecmp", fabric="roce")
    aligned = dataclasses.replace(net, ring_aligned=True)
    plain, ordered = place(net, np.array([16.0]), np.array([8.0])), place(aligned, np.array([16.0]), np.array([8.0]))
    assert plain.share_ring[0] == plain.share[0]
    assert ordered.share[0] == plain.share[0]
    unaligned_load, ring_load = (1 - 3 / 15) * 4.0, 4.0 / 16.0 * 4.0
    assert plain.share[0] == pytest.approx(crossing_share("ecmp", "roce", unaligned_load, CHANNELS_PER_NIC)[()])
    assert ordered.share_ring[0] == pytest.approx(crossing_share("ecmp", "roce", ring_load, CHANNELS_PER_NIC)[()])
    assert ordered.share_ring[0] > plain.share_ring[0]
