"""Pipeline parallelism: the bottleneck stage, point-to-point transfers between stages, and the bubble.

The slowest stage holds ceil(L/(p v)) v layers, or the even share of all layers + logits when the framework
balances the output layer by giving the last stage fewer layers (Llama 3 did); the larger of the two is used.
1F1B / interleaved 1F1B: the bubble is (p-1)/v micro-batch slots (Narayanan et al. 2021). Megatron
scatter/gather: each TP rank sends 1/t of the activation, then all-gathers it over NVLink.
docs/performance-model.md s.2, s.3, s.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.groups import GroupComm
from engine.performance.terms.shape import LayoutShape
from engine.units import TINY, Arr, BoolArr, Bytes, Ratio, Seconds

# Per virtual stage and micro-batch: the activation forward and its gradient backward.
P2P_TRANSFERS_PER_STAGE = 2.0


@dataclass(frozen=True)
class BottleneckStage:
    model_fraction: Ratio  # the bottleneck stage's share of the whole model's time per micro-batch
    compute_s: Seconds  # its compute per micro-batch (layers + its share of the logits)

    def per_microbatch(self, ctx: Context, per_layer_s: Arr) -> Seconds:
        """A per-layer time summed over the bottleneck stage's share of the layers."""
        return self.model_fraction * ctx.layers * per_layer_s


@dataclass(frozen=True)
class PipelineComm:
    """Send/recv per micro-batch on the bottleneck stage."""

    transfer_bytes: Bytes  # one activation (or gradient) per TP rank: M h 2 B / t
    raw_s: Seconds  # 2 v transfers
    hideable_s: Seconds  # interleaved schedules overlap their send/recv with other chunks' compute
    floor_s: Seconds  # one transfer per micro-batch stays exposed
    on_nic: BoolArr  # stage neighbours in different NVLink domains


def bottleneck_stage(ctx: Context, lay: Layouts, shape: LayoutShape, layer_total_s: Seconds, comm_layer_s: Seconds,
                     logits_s: Seconds) -> BottleneckStage:
    layer_all = layer_total_s + comm_layer_s
    model_time = ctx.layers * layer_all + logits_s
    stage_time = np.maximum(shape.stage_layers * layer_all, model_time / lay.pp)
    share = stage_time / np.maximum(model_time, TINY)
    return BottleneckStage(model_fraction=share, compute_s=share * (ctx.layers * layer_total_s + logits_s))


def pipeline_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles,
                  groups: GroupComm) -> PipelineComm:
    pp, vpp = lay.pp, lay.vpp
    nbytes = shape.microbatch_tokens * ctx.hidden * BYTES_ACT / lay.tp
    raw = np.where(pp > 1, P2P_TRANSFERS_PER_STAGE * vpp * groups.p2p(nbytes), 0.0)
    # Megatron-LM --overlap-p2p-communication, on by default with virtual stages
    hideable = np.where(prof.pp_overlap & (vpp > 1), raw, 0.0)
    floor = hideable / np.maximum(P2P_TRANSFERS_PER_STAGE * vpp, 1.0)
    return PipelineComm(transfer_bytes=nbytes, raw_s=raw, hideable_s=hideable, floor_s=floor,
                        on_nic=np.asarray(lay.tp * lay.cp * lay.dp >= ctx.domain))


def pipeline_bubble(lay: Layouts, microbatch_s: Seconds) -> Seconds:
    """(p-1)/v micro-batch slots of the 1F1B / interleaved schedule."""
    return (lay.pp - 1.0) / lay.vpp * microbatch_s
