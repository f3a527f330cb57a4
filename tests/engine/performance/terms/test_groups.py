"""The parallel groups of a layout on the fabric (terms/groups.py): Megatron rank order, and DP outermost."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.placement import place
from engine.performance.context import Context, Layouts
from engine.performance.terms.groups import ParallelGroup, fabric_groups
from tests.engine.performance._build import build, dense_doc, moe_doc


def test_groups_follow_megatron_rank_order() -> None:
    """TP innermost (stride 1), CP over TP, DP x CP over TP; pipeline neighbours t c d ranks apart."""
    ctx, lay, _ = build(dense_doc(tp=4, cp=2, pp=2, gpus=64, gb=64))
    g = fabric_groups(ctx, lay)
    assert (g.ranks[ParallelGroup.TP][0], g.strides[ParallelGroup.TP][0]) == (4, 1)
    assert (g.ranks[ParallelGroup.CP][0], g.strides[ParallelGroup.CP][0]) == (2, 4)
    assert (g.ranks[ParallelGroup.DP][0], g.strides[ParallelGroup.DP][0]) == (8, 4)  # d 4 x c 2
    assert g.pp_stride[0] == 32
    assert g.placements[ParallelGroup.TP].k[0] == 4 and not g.on_nic(ParallelGroup.TP)[0]
    assert g.placements[ParallelGroup.DP].nodes[0] == 4 and g.on_nic(ParallelGroup.DP)[0]  # 2 ranks per 8-GPU node


def test_allgather_dispatcher_runs_expert_traffic_over_tp_times_ep() -> None:
    ctx, lay, _ = build(moe_doc(tp=2, ep=4, dispatcher="allgather"))
    g = fabric_groups(ctx, lay)
    assert g.ranks[ParallelGroup.TP_EP][0] == 8 and g.strides[ParallelGroup.TP_EP][0] == 1
    assert g.placements[ParallelGroup.EP] is g.placements[ParallelGroup.TP_EP]
    ctx2, lay2, _ = build(moe_doc(tp=2, ep=4))
    g2 = fabric_groups(ctx2, lay2)
    assert ParallelGroup.TP_EP not in g2.ranks
    assert (g2.ranks[ParallelGroup.EP][0], g2.strides[ParallelGroup.EP][0]) == (4, 2)


# ---- parallelism.dp_placement (docs/performance-model.md s.3): 4 pods of 64 GPUs (8 nodes of 8, 4 nodes a leaf),
# TP 8, PP 4, DP 8 on 256 GPUs; oversubscription above the pods only
def _pods(placement: str, oversub: float = 1.0) -> tuple[Context, Layouts]:
    doc = dense_doc(tp=8, pp=4, gpus=256, gb=64)
    doc["parallelism"]["dp_placement"] = placement
    ctx, lay, _ = build(doc)
    ctx = dataclasses.replace(ctx, domain=8.0, leaf_nodes=4.0, pod_nodes=8.0, oversub_leaf=1.0,
                              oversub_spine=oversub, tiers=3.0, routing="adaptive", fabric="infiniband")
    return ctx, lay


def test_inner_placement_keeps_dp_inside_a_pod_and_sends_pipeline_traffic_across_pods() -> None:
    """Inner (TP, CP, DP, PP): DP ranks 8 GPUs apart, one per node over 8 consecutive nodes = one pod: 4 of a
    rank's 7 peers are outside its leaf (1 - 3/7), none outside the pod. Pipeline neighbours are t d = 64 GPUs
    apart: the next pod (a pair spread over 16 nodes: 8 x 2/16 = 1 member per pod, f_pod = 1)."""
    ctx, lay = _pods("inner")
    g = fabric_groups(ctx, lay)
    dp = g.placements[ParallelGroup.DP]
    assert (g.ranks[ParallelGroup.DP][0], g.strides[ParallelGroup.DP][0], g.pp_stride[0]) == (8, 8, 64)
    assert dp.nodes[0] == 8 and dp.f_leaf[0] == pytest.approx(1 - 3 / 7) and dp.f_pod[0] == 0.0
    pair = place(ctx.net, np.array([2.0]), g.pp_stride)
    assert pair.f_pod[0] == 1.0


def test_outer_placement_spreads_dp_across_pods_and_keeps_pipeline_neighbours_adjacent() -> None:
    """Outer (TP, CP, PP, DP; Llama 3): DP ranks t p = 32 GPUs (4 nodes) apart over all 32 nodes, one node in 4
    holds a member: 8 x 1/4 = 2 members per pod, so 6 of 7 peers are in another pod (1 - 1/7) and every peer is
    outside the leaf (4 x 1/4 = 1 member). Pipeline neighbours are t = 8 GPUs apart: adjacent nodes, same leaf."""
    ctx, lay = _pods("outer")
    g = fabric_groups(ctx, lay)
    dp = g.placements[ParallelGroup.DP]
    assert (g.strides[ParallelGroup.DP][0], g.pp_stride[0]) == (32, 8)
    assert dp.nodes[0] == 8 and dp.f_leaf[0] == pytest.approx(1.0) and dp.f_pod[0] == pytest.approx(1 - 1 / 7)
    assert g.order is not None and g.order.pp_stride_ranks[0] == 8 and g.order.dp_stride_ranks[0] == 32
    pair = place(ctx.net, np.array([2.0]), g.pp_stride)
    assert pair.f_leaf[0] == 0.0 and pair.f_pod[0] == 0.0


@pytest.mark.parametrize("placement", ["inner", "outer"])
def test_oversubscription_above_the_pods_slows_only_the_outer_dp_reduction(placement: str) -> None:
    """1:7 above the pods: the outer DP all-reduce (f_pod = 6/7, load 6/7 x 7 = 6) slows by at least 3x its
    inter-node part; the inner one (f_pod = 0) does not move. Pipeline p2p: the reverse."""
    nbytes = np.array([1e9])
    (c1, lay), (c7, _) = _pods(placement, 1.0), _pods(placement, 7.0)
    g1, g7 = fabric_groups(c1, lay), fabric_groups(c7, lay)
    dp1 = g1.time(CollectiveKind.ALL_REDUCE, nbytes, ParallelGroup.DP)[0]
    dp7 = g7.time(CollectiveKind.ALL_REDUCE, nbytes, ParallelGroup.DP)[0]
    pp1, pp7 = g1.p2p(nbytes)[0], g7.p2p(nbytes)[0]
    if placement == "inner":
        assert dp7 == pytest.approx(dp1) and pp7 > 3.0 * pp1
    else:
        assert dp7 > 3.0 * dp1 and pp7 == pytest.approx(pp1)


def test_a_topology_aware_rank_order_spares_the_outer_dp_ring_the_oversubscribed_tier() -> None:
    """Outer DP (8 ranks, 2 per pod of 8 nodes) under 1:7 above the pods: in switch order the ring leaves each of
    the 4 pods once (4 of 8 edges, load 4/8 x 7 = 3.5 instead of 6/7 x 7 = 6), so the all-gather over it (the
    cheaper of its ring and PAT) is faster than unaligned, and not faster than unaligned at 1:1; an all-to-all
    over the same group, whose partners spread over every pod, does not move."""
    nbytes = np.array([1e9])
    (c7, lay), (c1, _) = _pods("outer", 7.0), _pods("outer", 1.0)
    a7 = dataclasses.replace(c7, ring_aligned=True)
    g7, g1, ga = fabric_groups(c7, lay), fabric_groups(c1, lay), fabric_groups(a7, lay)
    ring_ag = {name: g.time(CollectiveKind.ALL_GATHER, nbytes, ParallelGroup.DP)[0]
               for name, g in (("unaligned 1:7", g7), ("unaligned 1:1", g1), ("aligned 1:7", ga))}
    assert ring_ag["aligned 1:7"] < ring_ag["unaligned 1:7"]
    assert ring_ag["aligned 1:7"] >= ring_ag["unaligned 1:1"] * (1 - 1e-12)
    assert (ga.time(CollectiveKind.ALL_TO_ALL, nbytes, ParallelGroup.DP)[0]
            == pytest.approx(g7.time(CollectiveKind.ALL_TO_ALL, nbytes, ParallelGroup.DP)[0]))


def test_outer_dp_x_cp_group_is_cp_blocks_strided_over_the_job() -> None:
    """TP 2, CP 2, PP 2, DP 4 on 32 GPUs, outer: a DP x CP group is 2 CP ranks 2 apart (one node) in each of 4
    blocks 8 GPUs apart: 2 ranks per node over 4 nodes (inner: 8 ranks 2 apart, 4 per node over 2 nodes)."""
    doc = dense_doc(tp=2, cp=2, pp=2, gpus=32, gb=32)
    doc["parallelism"]["dp_placement"] = "outer"
    ctx, lay, _ = build(doc)
    dp = fabric_groups(ctx, lay).placements[ParallelGroup.DP]
    assert (dp.k[0], dp.nodes[0]) == (2, 4)
    doc["parallelism"]["dp_placement"] = "inner"
    ctx, lay, _ = build(doc)
    dp = fabric_groups(ctx, lay).placements[ParallelGroup.DP]
    assert (dp.k[0], dp.nodes[0]) == (4, 2)


def test_a_pipeline_spanning_nodes_pays_its_inter_node_boundary() -> None:
    """Outer with t c = 4 < 8: pipeline neighbours 4 apart, but 4 stages span 2 nodes, so one boundary crosses
    nodes and paces the pipeline: the p2p stride is the domain (adjacent nodes)."""
    doc = dense_doc(tp=4, pp=4, gpus=64, gb=64)
    doc["parallelism"]["dp_placement"] = "outer"
    ctx, lay, _ = build(doc)
    g = fabric_groups(ctx, lay)
    assert g.order is not None and g.order.pp_stride_ranks[0] == 4 and g.pp_stride[0] == 8


def test_an_inner_pipeline_of_narrow_stages_pays_its_node_boundary_on_the_shared_nic() -> None:
    """Inner, TP 2 DP 2 (t c d = 4 GPUs a stage) PP 4 on 16 GPUs: neighbours 4 apart, two stages a node, so the
    boundary between nodes paces the pipeline (stride D = 8) and only the 4 GPUs of a node's last stage send across
    it. With one NIC per 8 GPUs each of them gets NIC / 4 = 2 nic_bw_gpu. PP 2 (8 GPUs, one node) stays on NVLink."""
    doc = dense_doc(tp=2, pp=4, gpus=16, gb=16)
    doc["cluster"]["nics_per_node"] = 1
    ctx, lay, _ = build(doc)
    assert ctx.gpus_per_nic == 8.0
    g = fabric_groups(ctx, lay)
    assert g.order is not None and g.order.pp_stride_ranks[0] == 4
    assert g.pp_stride[0] == 8 and g.pp_senders is not None and g.pp_senders[0] == 4
    nbytes = np.array([1e8])
    pair = place(ctx.net, np.array([2.0]), np.array([8.0]))
    expect = 1e8 / (2.0 * ctx.net.nic_bw_gpu * pair.share[0]) + pair.hop[0] + 9e-6  # + NCCL Simple's base latency
    assert g.p2p(nbytes)[0] == pytest.approx(expect, rel=1e-3)
    ctx2, lay2, _ = build(dense_doc(tp=2, pp=2, gpus=8, gb=16))
    g2 = fabric_groups(ctx2, lay2)
    assert g2.pp_stride[0] == 4 and g2.p2p(nbytes)[0] < 0.1 * g.p2p(nbytes)[0]
