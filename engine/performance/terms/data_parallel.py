"""Data-parallel gradient synchronisation at the step's end (ZeRO 0-2 reducing once per step) over the d c ranks.

ZeRO-0 all-reduces the gradients, ZeRO >= 1 reduce-scatters them and all-gathers the updated weights. Overlapped
with the last micro-batch's backward (gradients) and the first one's forward (weights) where the framework does
so, bucketed: the last bucket is always exposed. With v > 1 model chunks the reduction of chunk c runs while the
stage still computes the cool-down backwards of the chunks below it, (v-1)/v of min(p, m) micro-batch slots, and
the gather of chunk c+1 under the warm-up forwards of chunk c (Megatron-LM docs/distrib_optimizer.md), except the
first chunk's share, which only its own last backward / first forward can hide, and nothing where the stack reduces
a chunk after its last backward (:func:`first_chunk_exposure`). Either window is capped at the step's own compute (m micro-batches of pure compute on the stage, not the exposed
communication inside them): traffic cannot hide under more compute than the step has (issue #22 item 3.4).
Gradients are reduced in fp32 (Megatron), in bf16 with ZeRO-3 (FSDP). With HSDP (training.shard_group) ZeRO
reduce-scatters and gathers over the shard group and the shards' gradients are all-reduced across the replicas
once per step (:func:`replica_allreduce`; PyTorch HSDP, torchtitan). With MoE parallel folding
(``parallelism.etp`` != t) the routed-expert gradients reduce over their own expert-data-parallel group (edp =
t c d / (etp e) ranks, strided by etp e) and the rest over d c (:func:`folded_reduction`; Megatron-Core keeps
separate expert buffers); without folding every parameter is costed over d c as before. docs/performance-model.md
s.3a.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import (
    ZERO_SHARDS_GRADIENTS,
    ZERO_SHARDS_OPTIMIZER,
    ZERO_SHARDS_PARAMETERS,
    Layouts,
)
from engine.performance.datatypes import BF16_BYTES, FP32_BYTES, WEIGHT_BYTES
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.shape import LayoutShape
from engine.units import BoolArr, Count, Ratio, Seconds

# Half of a layer's exposed communication belongs to its forward (the window of the weight gather), half to its
# backward (the window of the gradient reduction).
FORWARD_COMM_SHARE = 0.5


@dataclass(frozen=True)
class DataParallelSync:
    grad_elem_bytes: Count  # bytes per gradient element reduced
    grad_reduction_s: Seconds  # one reduction of the stage's gradients (reduce-scatter with ZeRO >= 1, else all-reduce)
    replica_allreduce_s: Seconds  # HSDP: all-reduce of each shard's gradients across the replicas, once per step
    weight_gather_s: Seconds  # one all-gather of the updated weights (ZeRO >= 1)
    reduces_per_microbatch: BoolArr  # ZeRO-2 on a framework that reduces every micro-batch (zero2.py's term)
    bucket_fraction: Ratio  # the last bucket's share of the stage's parameters
    overlap_microbatches: Count  # extra micro-batch slots of interleaved chunks the traffic runs under
    forward_window_s: Seconds  # a micro-batch's forward on the stage (+ half its exposed communication)
    backward_window_s: Seconds
    window_cap_s: Seconds  # the step's pure compute on the stage: no window exceeds it (inf = uncapped)
    exposed_grad_s: Seconds
    exposed_gather_s: Seconds
    exposed_s: Seconds  # per step
    hidden_s: Seconds  # run under compute (still costs interference)


def replica_allreduce(zero: Count, shape: LayoutShape, groups: GroupComm, grad_bytes: Count) -> Seconds:
    """HSDP: each shard group holds 1/g of the gradients (``grad_bytes`` in all) after its reduce-scatter; the
    replicas (d c / g of them, one rank per group) all-reduce that shard once per step. Zero without HSDP (one
    replica) or ZeRO-0 (whose all-reduce already spans every d c rank)."""
    active = (zero >= ZERO_SHARDS_OPTIMIZER) & (shape.replica_ranks > 1)
    if not np.any(active):
        return np.zeros_like(np.asarray(zero, dtype=np.float64))
    return np.where(active, groups.time(CollectiveKind.ALL_REDUCE, grad_bytes / shape.zero_shard_ranks,
                                        ParallelGroup.REPLICA), 0.0)


def folded_reduction(lay: Layouts, groups: GroupComm, params: Count, expert_params: Count,
                     grad_bytes: Count) -> tuple[Seconds, Seconds]:
    """(gradient reduction, weight gather) [s] of a folded layout: the non-expert parameters over the d c group as
    for any layout (ZeRO >= 1: reduce-scatter over the shard group + all-gather; ZeRO-0: all-reduce over d c),
    then the routed-expert parameters over the EDP group the same way, one after the other on the DP stream."""
    dense = params - expert_params
    sharded = lay.zero >= ZERO_SHARDS_OPTIMIZER
    grad = np.where(sharded, groups.time(CollectiveKind.REDUCE_SCATTER, dense * grad_bytes, ParallelGroup.SHARD)
                    + groups.time(CollectiveKind.REDUCE_SCATTER, expert_params * grad_bytes, ParallelGroup.EDP),
                    groups.time(CollectiveKind.ALL_REDUCE, dense * grad_bytes, ParallelGroup.DP)
                    + groups.time(CollectiveKind.ALL_REDUCE, expert_params * grad_bytes, ParallelGroup.EDP))
    gather = np.where(sharded, groups.time(CollectiveKind.ALL_GATHER, dense * WEIGHT_BYTES, ParallelGroup.SHARD)
                      + groups.time(CollectiveKind.ALL_GATHER, expert_params * WEIGHT_BYTES, ParallelGroup.EDP), 0.0)
    return grad, gather


def first_chunk_exposure(vpp: Count, grad_s: Seconds, gather_s: Seconds, forward_s: Seconds, backward_s: Seconds,
                         sync_after_chunk: BoolArr) -> tuple[Seconds, Seconds]:
    """What the first model chunk's own traffic exposes at least [s], beside the whole step's window.

    The stage holds v chunks of about equal size, each 1/v of the gradients reduced and of the weights gathered.
    The first chunk (the first layers) is the last one whose backward ends, on the first pipeline stage at the very
    end of the step, and the first one whose forward starts. Its gradients (``grad_s`` / v) can hide only under its
    own last backward (``backward_s`` / v, buckets starting as they fill), and not at all where the stack starts a
    chunk's reduction after that backward (``sync_after_chunk``: Megatron-LM's grad_sync_func, frameworks.py); its
    updated weights (``gather_s`` / v) only under its own first forward (``forward_s`` / v, the forward waiting on
    each bucket). With one chunk (v = 1) this is the step's own rule (the last backward, the first forward), already
    in the window; interleaving spreads the rest of the traffic over the other chunks' compute, not this part."""
    v = np.maximum(vpp, 1.0)
    own_backward = np.where(sync_after_chunk & (v > 1), 0.0, backward_s / v)
    return np.maximum(grad_s / v - own_backward, 0.0), np.maximum(gather_s / v - forward_s / v, 0.0)


def data_parallel_sync(lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm, params: Count,
                       forward_s: Seconds, backward_s: Seconds,
                       step_compute_s: Seconds | None = None, expert_params: Count | None = None) -> DataParallelSync:
    """``forward_s`` / ``backward_s``: the bottleneck stage's forward / backward (+ recompute) per micro-batch
    including half of its exposed per-layer communication each; ``step_compute_s``: the stage's pure compute of
    the whole step (m micro-batches), the cap of either window (None: uncapped); ``expert_params``: the stage's
    routed-expert parameters per GPU (of ``params``), reduced over their own group where the layout folds."""
    zero, dpc, vpp = lay.zero, shape.grad_reduce_ranks, lay.vpp
    shard = ParallelGroup.SHARD
    grad_bytes = np.where(zero >= ZERO_SHARDS_PARAMETERS, BF16_BYTES, FP32_BYTES)
    per_mb_rs = ((zero >= ZERO_SHARDS_GRADIENTS) & prof.zero2_per_microbatch & (zero < ZERO_SHARDS_PARAMETERS)
                 & (dpc > 1))
    sharded = zero >= ZERO_SHARDS_OPTIMIZER
    t_grad = np.where(sharded, groups.time(CollectiveKind.REDUCE_SCATTER, params * grad_bytes, shard),
                      groups.time(CollectiveKind.ALL_REDUCE, params * grad_bytes, ParallelGroup.DP))
    t_gather = np.where(sharded, groups.time(CollectiveKind.ALL_GATHER, params * WEIGHT_BYTES, shard), 0.0)
    replicated = params  # HSDP replicas all-reduce these (folded: the experts have their own group)
    active = dpc > 1  # a layout with gradients to reduce
    folded = lay.folded
    if expert_params is not None and np.any(folded):
        f_grad, f_gather = folded_reduction(lay, groups, params, expert_params, grad_bytes)
        t_grad, t_gather = np.where(folded, f_grad, t_grad), np.where(folded, f_gather, t_gather)
        replicated = np.where(folded, params - expert_params, params)
        # folded, the experts are replicated over edp ranks even at d c = 1 (t 8, etp 1, e 2: edp 4)
        active = active | (folded & (shape.expert_dp_ranks > 1))
    replica = replica_allreduce(zero, shape, groups, replicated * grad_bytes)
    bucket = np.minimum(1.0, prof.bucket_params / np.maximum(params, 1.0))
    grad_step = np.where(per_mb_rs, 0.0, t_grad) + replica
    slots = np.where(vpp > 1, (vpp - 1.0) / vpp * np.minimum(lay.pp, shape.microbatch_count), 0.0)
    cap = np.full_like(slots, np.inf) if step_compute_s is None else step_compute_s
    win_grad = np.minimum(backward_s * (1.0 + slots), cap)
    win_gather = np.minimum(forward_s * (1.0 + slots), cap)
    first_grad, first_gather = first_chunk_exposure(vpp, grad_step, t_gather, forward_s, backward_s,
                                                    prof.grad_sync_after_chunk)
    exposed_grad = np.where(prof.grad_overlap, np.maximum(np.maximum(grad_step - win_grad, bucket * grad_step),
                                                          first_grad), grad_step)
    exposed_gather = np.where(prof.param_overlap, np.maximum(np.maximum(t_gather - win_gather, bucket * t_gather),
                                                             first_gather), t_gather)
    z3 = zero >= ZERO_SHARDS_PARAMETERS
    # ZeRO-3's own traffic is per layer (sharding.py); with HSDP its replicas still all-reduce once per step
    exposed_z3 = np.where(prof.grad_overlap, np.maximum(replica - win_grad, bucket * replica), replica)
    exposed = np.where(active, np.where(z3, exposed_z3, exposed_grad + exposed_gather), 0.0)
    hidden = np.where(active, np.where(z3, replica - exposed_z3,
                                        (grad_step - exposed_grad) + (t_gather - exposed_gather)), 0.0)
    return DataParallelSync(grad_elem_bytes=grad_bytes, grad_reduction_s=t_grad, replica_allreduce_s=replica,
                            weight_gather_s=t_gather,
                            reduces_per_microbatch=np.asarray(per_mb_rs), bucket_fraction=bucket,
                            overlap_microbatches=slots,
                            forward_window_s=forward_s, backward_window_s=backward_s, window_cap_s=cap,
                            exposed_grad_s=exposed_grad,
                            exposed_gather_s=exposed_gather, exposed_s=exposed, hidden_s=hidden)
