"""Pipeline parallelism: the bottleneck stage, point-to-point transfers between stages, and the bubble.

The output layer and the loss (and multi-token-prediction modules: terms/mtp.py) run on the last stage, beside its
whole layers; the slowest stage paces the schedule:
every stage ceil(L/(p v)) v layers and the last one the output layer too where the stack splits evenly, the best
whole-layer split where it can give the last stage fewer layers (Megatron-LM from 2024-09, DeepSpeed, Llama 3).
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
from engine.performance.terms.shape import LayoutShape, edge_stage_layers, edges_in_split
from engine.units import TINY, Arr, BoolArr, Bytes, Ratio, Seconds

# Per virtual stage and micro-batch: the activation forward and its gradient backward, each a batched send/receive
# pair on the critical path (Megatron's send_forward_recv_backward / send_backward_recv_forward).
P2P_TRANSFERS_PER_STAGE = 2.0
# A stack whose sends and receives block one at a time (FrameworkProfile.p2p_sequential, DeepSpeed's pipeline engine):
# a middle rank receives the activation, sends the gradient back, sends its activation on and receives that gradient,
# four transfers in a row per micro-batch.
P2P_SEQUENTIAL_TRANSFERS_PER_STAGE = 4.0


@dataclass(frozen=True)
class BottleneckStage:
    model_fraction: Ratio  # the bottleneck stage's share of the whole model's time per micro-batch
    compute_s: Seconds  # its compute per micro-batch (layers + its share of the tail: logits, MTP modules)
    comm_layers: float  # layers with per-layer communication in the model: L + the MTP modules' layers
    tail_comm_s: Seconds  # its share of the tail's own exposed communication (the MTP projections' TP collectives)
    tail_hidden_s: Seconds  # and of what the stack hides of it

    def per_microbatch(self, ctx: Context, per_layer_s: Arr) -> Seconds:
        """A per-layer time summed over the bottleneck stage's share of the layers (the MTP modules' included)."""
        return self.model_fraction * self.comm_layers * per_layer_s


@dataclass(frozen=True)
class PipelineComm:
    """Send/recv per micro-batch on the bottleneck stage."""

    transfer_bytes: Bytes  # one activation (or gradient) per TP rank: M h 2 B / t
    raw_s: Seconds  # 2 v transfers (4 v where each send and receive blocks alone)
    hideable_s: Seconds  # interleaved schedules overlap their send/recv with other chunks' compute
    floor_s: Seconds  # one transfer per micro-batch stays exposed
    on_nic: BoolArr  # stage neighbours in different NVLink domains


def last_rank_layers(ctx: Context, lay: Layouts, shape: LayoutShape, logits_layers: Arr, uneven: BoolArr) -> Arr:
    """The bottleneck pipeline rank's work per micro-batch in layers, with the output layer (and loss) on the last
    rank as ``logits_layers`` layers' worth: no stack splits the output layer across stages, so the last rank holds
    whole layers and all of it.

    * embedding and loss in the split (``parallelism.embedding_loss_in_split``): the last rank holds v chunks less
      the loss's place, plus the output layer; a middle rank v full chunks: max(C v, C v - 1 + g).
    * a stack that splits evenly (``uneven``: False; Megatron-LM before 2024-09): every rank C v layers, the last
      one the output layer too: C v + g.
    * a stack that can give the last rank fewer layers: the best whole-layer split. With n layers per chunk on the
      other p - 1 ranks the last holds K = max(0, L - n (p - 1) v), so the rank that binds takes
      max(K + g, n v); both sides are linear in n, so the best n is one of the two integers around the crossing
      n* = (L + g) / (p v). Never less than the even share (L + g) / p.
    Without a pipeline: the whole model, L + g."""
    p, v, big_l = lay.pp, lay.vpp, float(ctx.layers)
    g = logits_layers
    full = shape.stage_layers  # C v (at p = 2 with the edges in the split: both ranks are edge ranks, C v - 1)
    if edges_in_split(ctx):
        split = np.maximum(full, edge_stage_layers(ctx, lay) + g)
    else:
        n1 = np.floor((big_l + g) / (p * v))
        best = np.full_like(g, np.inf)
        for n in (n1, n1 + 1.0):
            rest = np.maximum(0.0, big_l - n * (p - 1.0) * v)
            best = np.minimum(best, np.maximum(rest + g, n * v))
        split = np.where(uneven, best, full + g)
    return np.where(p > 1, split, big_l + g)


def bottleneck_stage(ctx: Context, lay: Layouts, shape: LayoutShape, layer_total_s: Seconds, comm_layer_s: Seconds,
                     tail_compute_s: Seconds, tail_layers: float, uneven: BoolArr,
                     tail_comm_s: Seconds | float = 0.0, tail_hidden_s: Seconds | float = 0.0) -> BottleneckStage:
    """The pipeline rank that paces the schedule (:func:`last_rank_layers`) and its share of the model's time. The
    tail is the last rank's work beside its layers per micro-batch: ``tail_compute_s`` of compute (the output layer
    and loss; the MTP modules' projections, logits and layers: terms/mtp.py), the per-layer communication of
    ``tail_layers`` more layers (the MTP modules' layers) and ``tail_comm_s`` of its own exposed communication (the
    MTP projections' TP collectives; ``tail_hidden_s`` of theirs hidden). The stage's compute and communication are
    its share of the model's (continuous in every input, so a faster part never makes the stage slower)."""
    layer_all = layer_total_s + comm_layer_s
    tail_s = tail_compute_s + tail_layers * comm_layer_s + tail_comm_s
    model_time = ctx.layers * layer_all + tail_s
    g = tail_s / np.maximum(layer_all, TINY)
    # Whole layers summing to L + g over p ranks: the binding rank is never below the even share model_time / p.
    stage_time = last_rank_layers(ctx, lay, shape, g, uneven) * layer_all
    share = stage_time / np.maximum(model_time, TINY)
    return BottleneckStage(model_fraction=share, compute_s=share * (ctx.layers * layer_total_s + tail_compute_s),
                           comm_layers=ctx.layers + tail_layers, tail_comm_s=share * tail_comm_s,
                           tail_hidden_s=share * tail_hidden_s)


def pipeline_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles,
                  groups: GroupComm) -> PipelineComm:
    pp, vpp = lay.pp, lay.vpp
    nbytes = shape.microbatch_tokens * ctx.hidden * BYTES_ACT / lay.tp
    transfers = np.where(prof.p2p_sequential, P2P_SEQUENTIAL_TRANSFERS_PER_STAGE, P2P_TRANSFERS_PER_STAGE) * vpp
    raw = np.where(pp > 1, transfers * groups.p2p(nbytes), 0.0)
    # Megatron-LM --overlap-p2p-communication, on by default with virtual stages
    hideable = np.where(prof.pp_overlap & (vpp > 1), raw, 0.0)
    floor = hideable / np.maximum(transfers, 1.0)
    return PipelineComm(transfer_bytes=nbytes, raw_s=raw, hideable_s=hideable, floor_s=floor,
                        on_nic=np.asarray(lay.tp * lay.cp * lay.dp >= ctx.domain))


def pipeline_bubble(lay: Layouts, microbatch_s: Seconds) -> Seconds:
    """(p-1)/v micro-batch slots of the 1F1B / interleaved schedule."""
    return (lay.pp - 1.0) / lay.vpp * microbatch_s
