"""Tensor-parallel communication of one layer, one micro-batch: all-reduces (or all-gather + reduce-scatter pairs
with sequence parallelism) of the activations over the TP group. docs/performance-model.md s.3.

Two per layer forward (after attention, after the FFN), two backward, two more when full recomputation reruns the
forward (on the share of the layers it checkpoints: shape.recomputed_forwards); half on the attention side, half on
the FFN side. What the stack hides, as its source does it (frameworks.py): Megatron's asynchronous column-parallel
backward (``tp_backward_overlap``, from 2021-09) runs the input-gradient collective of each side under its
weight-gradient GEMM, and with sequence parallelism also the re-gather of the sequence-sharded input under the
data-gradient GEMM (half a pair more traffic), never more than the layer's backward GEMMs last; Transformer Engine's
userbuffer overlap (NeMo) hides its ``tp_overlap`` share of the rest. The forward's collectives (and a full
recomputation's) are exposed otherwise. MoE layers with TP: experts are tensor-parallel over the same ranks
(Megatron-Core's expert tensor parallelism defaults to the TP size), so the FFN-side pair carries every routed copy
of the token (top_k) plus the shared experts' input; those are the token dispatcher's own NCCL calls, not
Transformer Engine linear layers, so TP overlap cannot hide them. All-gather dispatcher (Megatron-Core
MoEAllGatherTokenDispatcher): one AG + RS pair (an all-reduce's cost) of the [S B e, h] hidden states over the t e
contiguous ranks per direction, never overlapped; counted here when e = 1 and as expert traffic otherwise.

MoE parallel folding (``parallelism.etp`` != t, Megatron-Core --expert-tensor-parallel-size): the routed copies'
pair runs over the etp expert-TP group (etp / t of the attention TP group's tokens: :func:`folded_expert_pair`),
none at etp = 1; the shared experts are then ordinary sequence-parallel TP layers over t, their pair hideable
like any Transformer Engine linear (as with the all-gather dispatcher). The all-gather dispatcher gathers over
its etp x e group (etp / t of the t x e group's tokens).

The parallel block (``model.parallel_block``, terms/block.py): both branches' row-parallel outputs are added before
one reduction a forward pass (GPT-NeoX's deferred reduction), and with sequence parallelism its backward is one
all-gather of the output gradient; the input side stays per branch. :func:`terms.block.merged_output_pairs` are
taken off the exposed pairs (the forward's, and the backward's output-gradient gather).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.block import merged_output_pairs
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.shape import LayoutShape, recomputed_forwards
from engine.units import Bytes, Count, Seconds

TP_COLLECTIVES_PER_LAYER = 4.0  # 2 forward, 2 backward
TP_COLLECTIVES_FULL_RECOMPUTE = 2.0  # the recomputed forward's two
TP_SIDES = 2.0  # attention side and FFN side: half of the collectives each
BACKWARD_PAIRS_PER_SIDE = 1.0  # of a side's pairs, the backward's (the rest: the forward and a recomputed forward)
# Shared experts add one copy of each token to the FFN-side gather of the routed copies (one however many).
SHARED_EXPERT_COPIES = 1.0
# Megatron's asynchronous column-parallel backward (frameworks.FrameworkProfile.tp_backward_overlap), per side of the
# layer in pairs (an all-reduce, or an all-gather + reduce-scatter): without sequence parallelism the backward's one
# all-reduce (the input gradient) runs under the weight-gradient GEMM; with it the backward's pair is the all-gather
# of the output gradient (exposed) and the reduce-scatter of the input gradient (hidden), and the input, kept
# sequence-sharded, is all-gathered again for the weight gradient under the data-gradient GEMM (half a pair more
# traffic, hidden). Either way one pair a side is hidden.
BACKWARD_HIDDEN_PAIRS = 1.0
SP_INPUT_REGATHER_PAIRS = 0.5


@dataclass(frozen=True)
class TensorParallelComm:
    """Per layer and micro-batch (averaged over dense and MoE layers)."""

    collectives_count: Count  # all-reduces (or AG+RS pairs) per layer
    attention_pair_s: Seconds  # one attention-side all-reduce of the M x h activation
    ffn_pair_s: Seconds  # one FFN-side pair of an MoE layer (routed copies or all-gather dispatch; dense: attention's)
    shared_pair_s: Seconds  # the shared experts' own pair (all-gather dispatcher only)
    dispatch_pair_s: Seconds  # the all-gather dispatcher's AG + RS over TP x EP
    hideable_s: Seconds  # what TP overlap may hide (the TP linears' collectives)
    hidden_s: Seconds  # what the framework hides (under the backward GEMMs, then its tp_overlap share)
    exposed_s: Seconds  # after the framework's overlap
    backward_exposed_s: Seconds  # the part of exposed_s in the backward pass (the rest is the forward's)
    under_backward_gemms_s: Seconds  # of hidden_s, what runs beside (and uses) the backward GEMMs (tp_backward_overlap)


def tensor_parallel_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles,
                         groups: GroupComm,
                         backward_gemm_s: tuple[Seconds, Seconds] | None = None) -> TensorParallelComm:
    """``backward_gemm_s``: the backward GEMMs of the layer's TP linears (data and weight gradients) on its attention
    side and on its FFN side [s], the windows each side's backward collectives hide beside (None: unbounded)."""
    f = shape.moe_layer_fraction
    zeros = np.zeros_like(lay.tp)
    act_bytes = shape.microbatch_tokens * ctx.hidden * BYTES_ACT
    t_attn = groups.time(CollectiveKind.ALL_REDUCE, act_bytes, ParallelGroup.TP)
    shared, dispatch = zeros, zeros
    if ctx.moe and ctx.allgather_dispatch:
        dispatch = groups.time(CollectiveKind.ALL_REDUCE, act_bytes * lay.ep * lay.expert_fold, ParallelGroup.TP_EP)
        ffn = np.where(lay.ep > 1, 0.0, dispatch)
        if ctx.shared_experts > 0:
            shared = t_attn
    elif ctx.moe:
        copies = ctx.top_k + min(ctx.shared_experts, SHARED_EXPERT_COPIES)
        ffn = groups.time(CollectiveKind.ALL_REDUCE, act_bytes * copies, ParallelGroup.TP)
        if np.any(lay.folded):
            ffn = np.where(lay.folded, folded_expert_pair(ctx, lay, act_bytes, groups), ffn)
            if ctx.shared_experts > 0:
                shared = np.where(lay.folded, t_attn, shared)
    else:
        ffn = t_attn
    redo = recomputed_forwards(ctx, lay)  # full recomputation's extra forwards (a share with recompute_layers)
    n_tp = TP_COLLECTIVES_PER_LAYER + redo * TP_COLLECTIVES_FULL_RECOMPUTE
    per_side = n_tp / TP_SIDES
    ffn_side = (1.0 - f) * t_attn + f * shared  # the FFN side's TP-linear pair (dense FFN, shared experts)
    sides = t_attn + ffn_side  # one pair on each side of the layer's TP linears
    backward = prof.tp_backward_overlap & (lay.tp > 1)
    regather = np.where(backward & lay.sp, SP_INPUT_REGATHER_PAIRS, 0.0)
    hideable = (per_side + regather) * sides
    hidden_pairs = np.where(backward, BACKWARD_HIDDEN_PAIRS, 0.0)
    if backward_gemm_s is None:
        under_backward = hidden_pairs * sides
    else:  # a collective hides only beside the GEMM it runs with, side by side
        attn_gemms, ffn_gemms = backward_gemm_s
        under_backward = (np.minimum(hidden_pairs * t_attn, attn_gemms)
                          + np.minimum(hidden_pairs * ffn_side, ffn_gemms))
    # the parallel block's merged output reductions (dense layers: the merged pair carries t_attn's bytes)
    merged_fwd, merged_bwd = merged_output_pairs(ctx, lay.sp)
    merged_fwd = merged_fwd * (1.0 + redo)  # the recomputed forward merges its reductions too
    merged = (merged_fwd + merged_bwd) * t_attn
    n_tp = n_tp - (merged_fwd + merged_bwd)
    hideable = hideable - merged
    left = hideable - under_backward
    keep = 1.0 - prof.tp_overlap
    experts = per_side * f * ffn  # the dispatcher's pairs: one a side forward (two with full recompute), one backward
    exposed = left * keep + experts
    # the backward's pair a side (and the re-gather) less what hides under it, and its share of the experts' pairs
    backward_exposed = (((BACKWARD_PAIRS_PER_SIDE + regather) * sides - merged_bwd * t_attn - under_backward) * keep
                        + experts / per_side)
    hidden = under_backward + left * prof.tp_overlap
    return TensorParallelComm(collectives_count=n_tp, attention_pair_s=t_attn, ffn_pair_s=ffn, shared_pair_s=shared,
                              dispatch_pair_s=dispatch, hideable_s=hideable, hidden_s=hidden, exposed_s=exposed,
                              backward_exposed_s=backward_exposed, under_backward_gemms_s=under_backward)


def folded_expert_pair(ctx: Context, lay: Layouts, act_bytes: Bytes, groups: GroupComm) -> Seconds:
    """One FFN-side pair of a folded MoE layer [s]: the token dispatcher's all-gather of the routed copies over the
    etp expert-TP group before the column-parallel expert GEMM and the reduce-scatter after the row-parallel one
    (an all-reduce's cost), of the top_k routed copies of etp / t of the attention TP group's M tokens; zero at
    etp = 1 (each rank's experts take its own sequence shard whole)."""
    nbytes = act_bytes * ctx.top_k * lay.expert_fold
    return np.where(lay.expert_tp > 1, groups.time(CollectiveKind.ALL_REDUCE, nbytes, ParallelGroup.ETP), 0.0)


def duplicated_grad_allreduce(lay: Layouts, groups: GroupComm, duplicated_params: Count,
                              grad_elem_bytes: Count) -> Seconds:
    """Once per step, after the data-parallel reduction: one coalesced all-reduce over the TP group of the
    gradients of weights held whole on every TP rank (``GpuParams.tp_duplicated_params``) [s]. Only with sequence
    parallelism, where each rank's gradient covers its own slice of the sequence; without it the ranks' gradients
    are identical and nothing is sent. Megatron-Core finalize_model_grads ->
    _allreduce_non_tensor_model_parallel_grads, after finish_grad_sync: nothing left to hide it under."""
    active = lay.sp & (lay.tp > 1) & (np.asarray(duplicated_params) > 0.0)  # an empty all-reduce is not launched
    if not np.any(active):
        return np.zeros_like(np.asarray(lay.tp, dtype=np.float64))
    t = groups.time(CollectiveKind.ALL_REDUCE, duplicated_params * grad_elem_bytes, ParallelGroup.TP)
    return np.where(active, t, 0.0)
