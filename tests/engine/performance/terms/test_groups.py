"""The parallel groups of a layout on the fabric (terms/groups.py): Megatron rank order."""

from __future__ import annotations

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
