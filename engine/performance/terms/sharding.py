"""ZeRO sharding over the data x context parallel ranks: what each stage shards, the ZeRO-3 per-layer traffic and
buffers, and the ZeRO-2 per-micro-batch gradient reduction. docs/performance-model.md s.3, s.6.

ZeRO-1 shards the optimizer states, ZeRO-2 also the gradients, ZeRO-3 (FSDP FULL_SHARD) also the weights, over d c
ranks; routed-expert weights are replicated only over the expert-data-parallel group (d c / e ranks), so their
states shard e times less (Megatron-Core distributed optimizer, DeepSpeed-MoE). ZeRO-3 all-gathers each layer's
weights for the forward and again for the backward and reduce-scatters its gradients, per micro-batch; the message
is one layer's parameters per rank, so at thousands of ranks the per-collective latency matters as much as the
bandwidth. ZeRO-2 as DeepSpeed / FSDP run it reduce-scatters the gradients at every micro-batch's backward.
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
from engine.performance.datatypes import ADAM_STATE_BYTES, GRAD_BYTES, WEIGHT_BYTES
from engine.performance.frameworks import LayoutProfiles
from engine.performance.terms.groups import GroupComm, ParallelGroup
from engine.performance.terms.shape import LayoutShape
from engine.units import BoolArr, Bytes, Count, Ratio, Seconds

ZERO3_GATHERS_PER_LAYER = 2.0  # one all-gather of the layer's weights for the forward, one for the backward
# The vocabulary matrices are gathered for the forward and the backward and their gradients reduce-scattered:
# three collectives of the same bytes, costed as all-gathers.
ZERO3_VOCAB_COLLECTIVES = 3.0
# Unsharded weight buffers ZeRO-3 holds: the layer computing, the one prefetched, and the one whose gradients are
# being reduced - about 3 layers (FSDP with one layer of prefetch).
ZERO3_BUFFER_LAYERS = 3.0


@dataclass(frozen=True)
class Zero3Traffic:
    """Per micro-batch on the bottleneck stage (zero without ZeRO-3 or without data parallelism)."""

    layer_gather_s: Seconds  # one all-gather of one layer's weights
    layer_reduce_scatter_s: Seconds  # one reduce-scatter of one layer's gradients
    per_layer_s: Seconds  # 2 gathers + 1 reduce-scatter
    vocab_s: Seconds  # the vocabulary matrices' three collectives
    per_microbatch_s: Seconds  # the stage's layers + vocabulary
    floor_s: Seconds  # never hidden: the first layer's gather (per_layer / prefetch depth)
    exposed_s: Seconds  # alone: what the micro-batch's compute cannot hide, + the floor


@dataclass(frozen=True)
class Zero2Traffic:
    """Per-micro-batch gradient reduce-scatter (ZeRO-2 on DeepSpeed / FSDP)."""

    per_microbatch_s: Seconds
    floor_s: Seconds  # the last bucket (all of it without overlap)
    exposed_s: Seconds  # alone: what the backward cannot hide, at least the floor


def shard_ranks(lay: Layouts, stage: float, ranks: Count) -> Count:
    """The ranks a model state is sharded over: ``ranks`` from ZeRO stage ``stage`` on, else 1 (replicated)."""
    return np.where(lay.zero >= stage, ranks, 1.0)


def state_bytes(lay: Layouts, prof: LayoutProfiles, params: Count, ranks: Count) -> Bytes:
    """Weights, gradients and Adam states of ``params`` parameters replicated over ``ranks`` ranks, as sharded by
    the layout's ZeRO stage (ZeRO-2 keeps only its gradient partition where the framework does)."""
    grads_sharded = (lay.zero >= ZERO_SHARDS_PARAMETERS) | ((lay.zero >= ZERO_SHARDS_GRADIENTS)
                                                           & prof.zero2_shards_grads)
    return params * (WEIGHT_BYTES / shard_ranks(lay, ZERO_SHARDS_PARAMETERS, ranks)
                     + GRAD_BYTES / np.where(grads_sharded, ranks, 1.0)
                     + ADAM_STATE_BYTES / shard_ranks(lay, ZERO_SHARDS_OPTIMIZER, ranks))


def zero3_buffer_bytes(lay: Layouts, layer_params: Count) -> Bytes:
    """ZeRO-3's unsharded weight buffers (bf16) per GPU."""
    return np.where(lay.zero >= ZERO_SHARDS_PARAMETERS, ZERO3_BUFFER_LAYERS * layer_params * WEIGHT_BYTES, 0.0)


def zero3_traffic(lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm, layer_params: Count,
                  vocab_params: Count, compute_s: Seconds) -> Zero3Traffic:
    """ZeRO-3 / FSDP collectives of one micro-batch over the d c group; ``compute_s`` = the micro-batch's compute
    (the window they run under, one layer prefetched: the first layer's gather stays exposed)."""
    z3 = lay.zero >= ZERO_SHARDS_PARAMETERS
    layer_bytes = layer_params * WEIGHT_BYTES
    gather = groups.time(CollectiveKind.ALL_GATHER, layer_bytes, ParallelGroup.DP)
    reduce_scatter = groups.time(CollectiveKind.REDUCE_SCATTER, layer_bytes, ParallelGroup.DP)
    per_layer = ZERO3_GATHERS_PER_LAYER * gather + reduce_scatter
    vocab_gather = groups.time(CollectiveKind.ALL_GATHER, vocab_params * WEIGHT_BYTES, ParallelGroup.DP)
    vocab = ZERO3_VOCAB_COLLECTIVES * vocab_gather
    per_mb = np.where(z3 & (shape.grad_reduce_ranks > 1), shape.stage_layers * per_layer + vocab, 0.0)
    floor = np.where(z3, per_layer / np.maximum(prof.zero3_prefetch_layers, 1.0), 0.0)
    return Zero3Traffic(layer_gather_s=gather, layer_reduce_scatter_s=reduce_scatter, per_layer_s=per_layer,
                        vocab_s=vocab, per_microbatch_s=per_mb, floor_s=floor,
                        exposed_s=np.maximum(0.0, per_mb - compute_s) + floor)


def zero2_traffic(prof: LayoutProfiles, grad_reduction_s: Seconds, per_microbatch: BoolArr, bucket_fraction: Ratio,
                  backward_s: Seconds) -> Zero2Traffic:
    """ZeRO-2's reduce-scatter at every micro-batch (``per_microbatch``: where the layout reduces so), under the
    micro-batch's backward ``backward_s`` where the framework overlaps it; the last bucket stays exposed."""
    per_mb = np.where(per_microbatch, grad_reduction_s, 0.0)
    floor = np.where(prof.grad_overlap, bucket_fraction, 1.0) * per_mb
    exposed = np.maximum(per_mb - np.where(prof.grad_overlap, backward_s, 0.0), floor)
    return Zero2Traffic(per_microbatch_s=per_mb, floor_s=floor, exposed_s=exposed)
