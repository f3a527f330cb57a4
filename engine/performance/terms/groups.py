"""The parallel groups of a layout on the fabric: the one interface between the terms and the collective model.

Ranks are ordered TP innermost, then CP, DP, PP (Megatron order): the TP group is contiguous (stride 1), the CP
group strides over TP, the DP (x CP) group over TP, the EP group over TP inside the DP x CP ranks, the all-gather
dispatcher's group is TP x EP contiguous, and pipeline neighbours are t c d ranks apart. Terms ask a
:class:`GroupComm` for the time of a collective over a named group; :class:`FabricGroups` answers with the NCCL
model (collectives/), a test with a closed form of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.collectives.moe_dispatch import moe_alltoall_time
from engine.performance.collectives.p2p import p2p_time
from engine.performance.collectives.placement import Net, Placement, on_nic, place
from engine.performance.collectives.tuning import collective_time
from engine.performance.context import Context, Layouts
from engine.units import BoolArr, Bytes, Count, Seconds


class ParallelGroup(StrEnum):
    TP = "tp"
    CP = "cp"
    DP = "dp"  # data x context parallel ranks: gradients and ZeRO shards
    EP = "ep"  # expert-parallel traffic: EP ranks (all-to-all), or TP x EP (all-gather dispatcher)
    TP_EP = "tp_ep"  # the all-gather dispatcher's group (MoE with the allgather dispatcher only)


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
    pp_stride: Count  # GPUs between pipeline neighbours

    def time(self, kind: CollectiveKind, nbytes: Bytes, group: ParallelGroup) -> Seconds:
        return collective_time(self.net, kind, nbytes, self.ranks[group], self.strides[group], self.placements[group])

    def moe_alltoall(self, tokens: Count, per_token_bytes: float, top_k: float) -> Seconds:
        g = ParallelGroup.EP
        return moe_alltoall_time(self.net, tokens, per_token_bytes, top_k, self.ranks[g], self.strides[g],
                                 self.placements[g])

    def p2p(self, nbytes: Bytes) -> Seconds:
        return p2p_time(self.net, nbytes, self.pp_stride)

    def on_nic(self, group: ParallelGroup) -> BoolArr:
        return on_nic(self.placements[group])


def fabric_groups(ctx: Context, lay: Layouts) -> FabricGroups:
    net, g = ctx.net, ParallelGroup
    ones = np.ones_like(lay.tp)
    ranks: dict[ParallelGroup, Count] = {g.TP: lay.tp, g.CP: lay.cp, g.DP: lay.dp * lay.cp, g.EP: lay.ep}
    strides: dict[ParallelGroup, Count] = {g.TP: ones, g.CP: lay.tp, g.DP: lay.tp, g.EP: lay.tp}
    if ctx.moe and ctx.allgather_dispatch:  # the dispatcher's expert traffic runs over the TP x EP group itself
        ranks[g.TP_EP] = ranks[g.EP] = lay.tp * lay.ep
        strides[g.TP_EP] = strides[g.EP] = ones
    placements: dict[ParallelGroup, Placement] = {k: place(net, ranks[k], strides[k]) for k in ranks if k != g.TP_EP}
    if g.TP_EP in ranks:
        placements[g.TP_EP] = placements[g.EP]
    return FabricGroups(net=net, ranks=ranks, strides=strides, placements=placements,
                        pp_stride=lay.tp * lay.cp * lay.dp)
