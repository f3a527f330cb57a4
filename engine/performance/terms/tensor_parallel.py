"""Tensor-parallel communication of one layer, one micro-batch: all-reduces (or all-gather + reduce-scatter pairs
with sequence parallelism) of the activations over the TP group. docs/performance-model.md s.3.

Two per layer forward (after attention, after the FFN), two backward, two more when full recomputation reruns
the forward; half on the attention side, half on the FFN side. Transformer Engine overlap hides the framework's
share of them (frameworks.py, tp_overlap). MoE layers with TP: experts are tensor-parallel over the same ranks
(Megatron-Core's expert tensor parallelism defaults to the TP size), so the FFN-side pair carries every routed
copy of the token (top_k) plus the shared experts' input; those are the token dispatcher's own NCCL calls, not
Transformer Engine linear layers, so TP overlap cannot hide them. All-gather dispatcher (Megatron-Core
MoEAllGatherTokenDispatcher): one AG + RS pair (an all-reduce's cost) of the [S B e, h] hidden states over the
t e contiguous ranks per direction, never overlapped; counted here when e = 1 and as expert traffic otherwise.

MoE parallel folding (``parallelism.etp`` != t, Megatron-Core --expert-tensor-parallel-size): the routed copies'
pair runs over the etp expert-TP group (etp / t of the attention TP group's tokens: :func:`folded_expert_pair`),
none at etp = 1; the shared experts are then ordinary sequence-parallel TP layers over t, their pair hideable
like any Transformer Engine linear (as with the all-gather dispatcher). The all-gather dispatcher gathers over
its etp x e group (etp / t of the t x e group's tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import RECOMPUTE_FULL, Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.shape import LayoutShape
from engine.units import Bytes, Count, Seconds

TP_COLLECTIVES_PER_LAYER = 4.0  # 2 forward, 2 backward
TP_COLLECTIVES_FULL_RECOMPUTE = 2.0  # the recomputed forward's two
TP_SIDES = 2.0  # attention side and FFN side: half of the collectives each
# Shared experts add one copy of each token to the FFN-side gather of the routed copies (one however many).
SHARED_EXPERT_COPIES = 1.0


@dataclass(frozen=True)
class TensorParallelComm:
    """Per layer and micro-batch (averaged over dense and MoE layers)."""

    collectives_count: Count  # all-reduces (or AG+RS pairs) per layer
    attention_pair_s: Seconds  # one attention-side all-reduce of the M x h activation
    ffn_pair_s: Seconds  # one FFN-side pair of an MoE layer (routed copies or all-gather dispatch; dense: attention's)
    shared_pair_s: Seconds  # the shared experts' own pair (all-gather dispatcher only)
    dispatch_pair_s: Seconds  # the all-gather dispatcher's AG + RS over TP x EP
    hideable_s: Seconds  # what TP overlap may hide
    exposed_s: Seconds  # after the framework's overlap


def tensor_parallel_comm(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles,
                         groups: GroupComm) -> TensorParallelComm:
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
    n_tp = TP_COLLECTIVES_PER_LAYER + np.where(lay.recompute >= RECOMPUTE_FULL, TP_COLLECTIVES_FULL_RECOMPUTE, 0.0)
    per_side = n_tp / TP_SIDES
    hideable = per_side * (t_attn + (1.0 - f) * t_attn + f * shared)
    exposed = hideable * (1.0 - prof.tp_overlap) + per_side * f * ffn
    return TensorParallelComm(collectives_count=n_tp, attention_pair_s=t_attn, ffn_pair_s=ffn, shared_pair_s=shared,
                              dispatch_pair_s=dispatch, hideable_s=hideable, exposed_s=exposed)


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
