"""The parallel groups of a layout on the fabric: the one interface between the terms and the collective model.

Ranks are ordered TP innermost, then CP, DP, PP (Megatron order, ``parallelism.dp_placement`` "inner"): the TP
group is contiguous (stride 1), the CP group strides over TP, the DP (x CP) group over TP, the EP group over TP
inside the DP x CP ranks, the all-gather dispatcher's group is TP x EP contiguous, and pipeline neighbours are
t c d ranks apart. With MoE parallel folding (``parallelism.etp`` != tp) the expert groups follow Megatron-Core's
expert order etp-ep-edp over the same t c d ranks: ETP adjacent, EP strided by etp, EDP by etp e. With DP outermost ("outer": TP, CP, PP, DP; Llama 3, arXiv 2407.21783 s.3.3.2) pipeline
neighbours are t c apart and DP ranks t c p apart, so a DP x CP group is CP blocks strided over the whole job
(:func:`rank_order`, :func:`~engine.performance.collectives.placement.place_nested`). Terms ask a
:class:`GroupComm` for the time of a collective over a named group; :class:`FabricGroups` answers with the NCCL
model (collectives/), a test with a closed form of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Protocol

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.moe_dispatch import moe_alltoall_time
from engine.performance.collectives.p2p import p2p_time
from engine.performance.collectives.placement import Net, Placement, on_nic, place_nested
from engine.performance.collectives.tuning import collective_time
from engine.performance.context import Context, Layouts
from engine.performance.terms.shape import hsdp_shard_ranks
from engine.units import BoolArr, Bytes, Count, Seconds


class ParallelGroup(StrEnum):
    TP = "tp"
    CP = "cp"
    DP = "dp"  # data x context parallel ranks: gradients (and ZeRO shards without HSDP)
    SHARD = "shard"  # the ZeRO shard group: every DP x CP rank, or training.shard_group consecutive ones (HSDP)
    REPLICA = "replica"  # HSDP: the same shard in every shard group (one rank per group)
    EP = "ep"  # expert-parallel traffic: EP ranks (all-to-all), or TP x EP (all-gather dispatcher)
    TP_EP = "tp_ep"  # the all-gather dispatcher's group (MoE with the allgather dispatcher only)
    ETP = "etp"  # expert tensor parallelism of folded layouts (parallelism.etp != tp); present only with folding
    EDP = "edp"  # expert data parallelism of folded layouts: routed-expert gradients; present only with folding


class GroupComm(Protocol):
    """Communication times over the groups of a layout (arrays over layouts)."""

    def time(self, kind: CollectiveKind, nbytes: Bytes, group: ParallelGroup) -> Seconds: ...

    def moe_alltoall(self, tokens: Count, per_token_bytes: float, top_k: float) -> Seconds: ...

    def p2p(self, nbytes: Bytes) -> Seconds: ...

    def on_nic(self, group: ParallelGroup) -> BoolArr: ...


@dataclass(frozen=True)
class FabricGroups:
    """:class:`GroupComm` on the scenario's fabric: NCCL's algorithms and protocols on the tiers each group crosses."""

    net: Net
    ranks: Mapping[ParallelGroup, Count]
    strides: Mapping[ParallelGroup, Count]
    placements: Mapping[ParallelGroup, Placement]
    pp_stride: Count  # GPUs between the pipeline neighbours of the slowest stage boundary
    order: RankOrder | None = None  # the rank order the placements follow
    pp_senders: Count | None = None  # GPUs of a node sending across the slowest boundary (None: all of them)

    def time(self, kind: CollectiveKind, nbytes: Bytes, group: ParallelGroup) -> Seconds:
        return collective_time(self.net, kind, nbytes, self.ranks[group], self.strides[group], self.placements[group])

    def moe_alltoall(self, tokens: Count, per_token_bytes: float, top_k: float) -> Seconds:
        g = ParallelGroup.EP
        return moe_alltoall_time(self.net, tokens, per_token_bytes, top_k, self.ranks[g], self.strides[g],
                                 self.placements[g])

    def p2p(self, nbytes: Bytes) -> Seconds:
        return p2p_time(self.net, nbytes, self.pp_stride, self.pp_senders)

    def on_nic(self, group: ParallelGroup) -> BoolArr:
        return on_nic(self.placements[group])


@dataclass(frozen=True)
class RankOrder:
    """GPUs between neighbours of each dimension in the rank order (``parallelism.dp_placement``): inner = TP, CP,
    DP, PP from innermost; outer = TP, CP, PP, DP (docs/performance-model.md s.3, "Which tier the traffic
    crosses")."""

    cp_stride_ranks: Count  # t
    dp_stride_ranks: Count  # inner t c; outer t c p
    pp_stride_ranks: Count  # inner t c d; outer t c


def rank_order(lay: Layouts) -> RankOrder:
    outer = lay.dp_outer
    tc = lay.tp * lay.cp
    return RankOrder(cp_stride_ranks=lay.tp, dp_stride_ranks=np.where(outer, tc * lay.pp, tc),
                     pp_stride_ranks=np.where(outer, tc, tc * lay.dp))


def shard_shapes(lay: Layouts, shard: Count, dp_stride: Count) -> tuple[tuple[Count, Count, Count, Count],
                                                                       tuple[Count, Count, Count, Count]]:
    """(ranks per block, stride in the block, blocks, stride between blocks) of the ZeRO shard group (``shard``
    ranks: whole CP blocks, then DP) and of the replica group (one rank per shard group). Inner: both are runs of
    one block, stride t and t g; outer: the shard is CP blocks strided by ``dp_stride`` (t c p), the replica
    group one rank every ``shard / c`` DP blocks. Without HSDP (shard = d c) the shard group is the DP x CP group."""
    ones = np.ones_like(lay.tp)
    outer = lay.dp_outer
    blocks = shard / lay.cp  # DP ranks in one shard group (outer)
    replicas = lay.dp * lay.cp / shard
    shard_shape = (np.where(outer, lay.cp, ones), np.where(outer, lay.tp, ones), np.where(outer, blocks, shard),
                   np.where(outer, dp_stride, lay.tp))
    replica_shape = (ones, ones, replicas, np.where(outer, dp_stride * blocks, lay.tp * shard))
    return shard_shape, replica_shape


def fabric_groups(ctx: Context, lay: Layouts) -> FabricGroups:
    """The groups' sizes and placements. DP x CP and EP (drawn from the DP x CP ranks, CP first) are CP blocks
    (stride t) repeated over DP (stride ``dp_stride_ranks``); inner, where DP strides t c right after CP, each is
    one group of stride t, as before (``place_nested`` with one rank per block)."""
    net, g = ctx.net, ParallelGroup
    ones = np.ones_like(lay.tp)
    order, outer = rank_order(lay), lay.dp_outer
    ep_in_cp = np.where(outer, np.minimum(lay.ep, lay.cp), ones)  # EP ranks inside one CP block
    ranks: dict[ParallelGroup, Count] = {g.TP: lay.tp, g.CP: lay.cp, g.DP: lay.dp * lay.cp, g.EP: lay.ep}
    # (ranks per block, stride in the block, blocks, stride between blocks) per group
    shape: dict[ParallelGroup, tuple[Count, Count, Count, Count]] = {
        g.TP: (ones, ones, lay.tp, ones), g.CP: (ones, ones, lay.cp, lay.tp),
        g.DP: (np.where(outer, lay.cp, ones), np.where(outer, lay.tp, ones), np.where(outer, lay.dp, ranks[g.DP]),
               np.where(outer, order.dp_stride_ranks, lay.tp)),
        g.EP: (ep_in_cp, np.where(outer, lay.tp, ones), lay.ep / ep_in_cp, np.where(outer, order.dp_stride_ranks,
                                                                                   lay.tp)),
    }
    hsdp = ctx.shard_group > 0
    shard = hsdp_shard_ranks(ctx, lay) if hsdp else ranks[g.DP]
    ranks[g.SHARD], ranks[g.REPLICA] = shard, lay.dp * lay.cp / shard
    if hsdp:  # without HSDP the shard group is the DP x CP group (same placement, below) and there is no replica
        shape[g.SHARD], shape[g.REPLICA] = shard_shapes(lay, shard, order.dp_stride_ranks)
    if ctx.moe and ctx.allgather_dispatch:  # the dispatcher's expert traffic runs over the TP x EP group itself
        ranks[g.TP_EP] = ranks[g.EP] = lay.tp * lay.ep
        shape[g.EP] = (np.where(outer, lay.tp * ep_in_cp, ones), ones,
                       np.where(outer, lay.ep / ep_in_cp, ranks[g.EP]), np.where(outer, order.dp_stride_ranks, ones))
    strides: dict[ParallelGroup, Count] = {k: v[3] for k, v in shape.items()}
    placements: dict[ParallelGroup, Placement] = {k: place_nested(net, *v) for k, v in shape.items()}
    if not hsdp:
        strides[g.SHARD] = strides[g.REPLICA] = strides[g.DP]
        placements[g.SHARD] = placements[g.REPLICA] = placements[g.DP]  # a replica group of one rank: never used
    if g.TP_EP in ranks:
        strides[g.TP_EP], placements[g.TP_EP] = strides[g.EP], placements[g.EP]
    if ctx.moe and np.any(lay.folded):
        _fold_expert_groups(ctx, lay, order, ranks, strides, placements)
    # A pipeline spanning several domains has a boundary between two (adjacent) domains even where neighbours are
    # closer than a domain (t c d < D inner, t c < D outer), and the slowest boundary paces the pipeline; there the
    # stage's own width of GPUs (the stride) sends out of the node (collectives/p2p.boundary_nic_share).
    pp = order.pp_stride_ranks
    crosses = (pp < net.domain) & (pp * lay.pp > net.domain)
    return FabricGroups(net=net, ranks=ranks, strides=strides, placements=placements,
                        pp_stride=np.where(crosses, net.domain, pp), order=order,
                        pp_senders=np.minimum(pp, net.domain))


def strided_in_stage(n: Count, stride: Count, lay: Layouts, dp_stride: Count) -> tuple[Count, Count, Count, Count]:
    """(ranks per block, stride in the block, blocks, stride between blocks) of ``n`` ranks ``stride`` apart in a
    pipeline stage's own rank order (t c d ranks, TP innermost). Inner DP placement: the stage's ranks are
    contiguous, one run of stride ``stride``. Outer: they are t c contiguous blocks ``dp_stride`` (t c p) apart, so
    a run of t c / stride ranks per block, the next block dp_stride away; a stride of a block or more takes one
    rank per block, stride / (t c) blocks apart."""
    ones = np.ones_like(lay.tp)
    tc = lay.tp * lay.cp
    outer = lay.dp_outer
    in_block = np.where(stride < tc, np.clip(np.floor(tc / stride), 1.0, n), ones)
    block_stride = np.where(stride < tc, dp_stride, dp_stride * stride / tc)
    return (np.where(outer, in_block, ones), np.where(outer, stride, ones), np.where(outer, n / in_block, n),
            np.where(outer, block_stride, stride))


def _fold_expert_groups(ctx: Context, lay: Layouts, order: RankOrder, ranks: dict[ParallelGroup, Count],
                        strides: dict[ParallelGroup, Count], placements: dict[ParallelGroup, Placement]) -> None:
    """MoE parallel folding (Megatron-Core expert rank order etp-ep-edp-pp over each stage's t c d ranks, arXiv
    2504.14960): the expert-TP group is etp adjacent ranks, the EP group ep ranks strided by etp (not t), the
    expert-DP group t c d / (etp e) ranks strided by etp e; the all-gather dispatcher's group is etp x e adjacent
    ranks. Only the folded layouts' EP entries change; the others keep theirs, bit for bit."""
    g, net, folded = ParallelGroup, ctx.net, lay.folded
    etp, dp_stride = lay.expert_tp, order.dp_stride_ranks
    edp = lay.tp * lay.cp * lay.dp / (etp * lay.ep)
    shapes = {g.ETP: strided_in_stage(etp, np.ones_like(etp), lay, dp_stride),
              g.EDP: strided_in_stage(edp, etp * lay.ep, lay, dp_stride)}
    ranks[g.ETP], ranks[g.EDP] = etp, edp
    if ctx.allgather_dispatch:  # the dispatcher's own group: etp x e adjacent ranks
        ep_ranks = etp * lay.ep
        ep_shape = strided_in_stage(ep_ranks, np.ones_like(etp), lay, dp_stride)
    else:
        ep_ranks, ep_shape = lay.ep, strided_in_stage(lay.ep, etp, lay, dp_stride)
    for key, shape in shapes.items():
        strides[key], placements[key] = shape[3], place_nested(net, *shape)
    keys = [g.EP, g.TP_EP] if g.TP_EP in ranks else [g.EP]
    pl, stride = place_nested(net, *ep_shape), ep_shape[3]
    for key in keys:
        ranks[key] = np.where(folded, ep_ranks, ranks[key])
        strides[key] = np.where(folded, stride, strides[key])
        placements[key] = _where_placement(folded, pl, placements[key])


def _where_placement(cond: BoolArr, a: Placement, b: Placement) -> Placement:
    """``a`` where ``cond``, else ``b``, field by field."""
    return Placement(**{f.name: np.where(cond, getattr(a, f.name), getattr(b, f.name)) for f in fields(Placement)})
