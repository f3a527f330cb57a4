"""ZeRO sharding over the data x context parallel ranks: what each stage shards, the ZeRO-3 per-layer traffic and
buffers, and the ZeRO-2 per-micro-batch gradient reduction. docs/performance-model.md s.3, s.6.

ZeRO-1 shards the optimizer states, ZeRO-2 also the gradients, ZeRO-3 (FSDP FULL_SHARD) also the weights, over d c
ranks (with HSDP, training.shard_group, over the g ranks of a shard group: LayoutShape.zero_shard_ranks); routed-expert weights are replicated only over the expert-data-parallel group (d c / e ranks), so their
states shard e times less (Megatron-Core distributed optimizer, DeepSpeed-MoE). ZeRO-3 all-gathers each layer's
weights for the forward and again for the backward and reduce-scatters its gradients, per micro-batch; the message
is one layer's parameters per rank, so at thousands of ranks the per-collective latency matters as much as the
bandwidth. ZeRO-2 as DeepSpeed / FSDP run it reduce-scatters the gradients at every micro-batch's backward.

How the stack issues those collectives (frameworks.py, dated by training.framework_release): bucketed and
asynchronous (every stack since 2022: FSDP / FSDP2 / Megatron-FSDP one gather per layer, DeepSpeed one per
stage3_prefetch_bucket_size parameters), hidden under compute but for the first layer's, each launch costing the host
``COLLECTIVE_LAUNCH_S`` (binding only when the micro-batch's compute is shorter than the launches); or DeepSpeed's
2021 ZeRO-3: one synchronous collective per parameter tensor (``parameter_tensors``), each paying its latency and
its launch, the gathers never hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.collectives.kinds import CollectiveKind
from engine.performance.context import (
    GATED_FFN_MATRICES,
    ZERO_SHARDS_GRADIENTS,
    ZERO_SHARDS_OPTIMIZER,
    ZERO_SHARDS_PARAMETERS,
    Context,
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
# Host time to issue one collective through torch.distributed (Python call, c10d work object, stream event, NCCL
# enqueue), beyond NCCL's own latency (which groups.time already holds): a 1 KiB torch.distributed all_gather across
# 2 nodes takes 39.8 us end to end (uccl-project/uccl PR #580's benchmark of NCCL), of which NCCL's modelled
# small-message latency is about 20 us (collectives/protocols.py: 24 us for 2 nodes) - about 20 us per launch.
COLLECTIVE_LAUNCH_S = 20e-6
# Parameter tensors (nn.Parameter objects) of one transformer layer as the model code registers them: GPT-2/BERT
# style (Megatron GPT, HF GPT-2 / BERT / BLOOM: non-gated FFN, with biases): fused QKV weight + bias, output
# projection weight + bias, fc1 and fc2 weight + bias, two LayerNorms weight + bias = 12; Llama style (gated FFN,
# HF Llama / Mistral / Qwen, no biases): q, k, v, o, gate, up, down, two RMSNorm weights = 9.
PLAIN_LAYER_TENSORS = 12.0
GATED_LAYER_TENSORS = 9.0
PLAIN_FFN_TENSORS = 4.0  # fc1, fc2 weight + bias (of those 12)
GATED_FFN_TENSORS = 3.0  # gate, up, down (of those 9)
MOE_ROUTER_TENSORS = 1.0  # the router's weight in an MoE layer


@dataclass(frozen=True)
class Zero3Traffic:
    """Per micro-batch on the bottleneck stage (zero without ZeRO-3 or without data parallelism)."""

    layer_gather_s: Seconds  # all-gathering one layer's weights (its k_g collectives)
    layer_reduce_scatter_s: Seconds  # reduce-scattering one layer's gradients (its k_r collectives)
    per_layer_s: Seconds  # 2 gathers + 1 reduce-scatter (+ the gathers' launches where synchronous)
    gathers_per_layer_count: Count  # k_g: collectives per gather of one layer
    reduce_scatters_per_layer_count: Count  # k_r
    launch_s: Seconds  # host time issuing the micro-batch's collectives (COLLECTIVE_LAUNCH_S each)
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


def state_bytes(lay: Layouts, prof: LayoutProfiles, params: Count, ranks: Count,
                adam_bytes: float = ADAM_STATE_BYTES) -> Bytes:
    """Weights, gradients and Adam states (``adam_bytes`` per parameter: 12 fp32, 8 with bf16 moments) of ``params``
    parameters replicated over ``ranks`` ranks, as sharded by the layout's ZeRO stage (ZeRO-2 keeps only its
    gradient partition where the framework does)."""
    grads_sharded = (lay.zero >= ZERO_SHARDS_PARAMETERS) | ((lay.zero >= ZERO_SHARDS_GRADIENTS)
                                                           & prof.zero2_shards_grads)
    return params * (WEIGHT_BYTES / shard_ranks(lay, ZERO_SHARDS_PARAMETERS, ranks)
                     + GRAD_BYTES / np.where(grads_sharded, ranks, 1.0)
                     + adam_bytes / shard_ranks(lay, ZERO_SHARDS_OPTIMIZER, ranks))


def zero3_buffer_bytes(lay: Layouts, layer_params: Count) -> Bytes:
    """ZeRO-3's unsharded weight buffers (bf16) per GPU."""
    return np.where(lay.zero >= ZERO_SHARDS_PARAMETERS, ZERO3_BUFFER_LAYERS * layer_params * WEIGHT_BYTES, 0.0)


def parameter_tensors(ctx: Context, lay: Layouts) -> Count:
    """Parameter tensors of one layer on one GPU, averaged over dense and MoE layers: the layer's tensors (GPT-style
    12, Llama-style 9), in MoE layers the FFN's replaced by the router and the local (e / ep) and shared experts'."""
    gated = ctx.mats == GATED_FFN_MATRICES
    dense = GATED_LAYER_TENSORS if gated else PLAIN_LAYER_TENSORS
    ffn = GATED_FFN_TENSORS if gated else PLAIN_FFN_TENSORS
    if not ctx.moe:
        return np.full_like(lay.tp, dense)
    moe = dense - ffn + MOE_ROUTER_TENSORS + (ctx.experts / lay.ep + ctx.shared_experts) * ffn
    return (ctx.dense_layers * dense + (ctx.layers - ctx.dense_layers) * moe) / ctx.layers


def zero3_traffic(lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, groups: GroupComm, layer_params: Count,
                  vocab_params: Count, compute_s: Seconds, layer_tensors: Count | float = 1.0) -> Zero3Traffic:
    """ZeRO-3 / FSDP collectives of one micro-batch over the d c group; ``compute_s`` = the micro-batch's compute
    (the window they run under, one layer prefetched: the first layer's gather stays exposed); ``layer_tensors`` =
    :func:`parameter_tensors` (read where the framework gathers per tensor).

    Bucketed: a layer's gather is k_g = ceil(P / bucket) collectives of P/k_g parameters (1 without a bucket), its
    reduce-scatter k_r likewise; exposed = max(0, c - compute, launches - compute) + the first layer's.
    Per tensor, synchronous: k_g = k_r = the layer's tensors, each gather + its launch exposed; the reduce-scatters
    run under the backward as before."""
    z3 = lay.zero >= ZERO_SHARDS_PARAMETERS
    sync = prof.zero3_per_tensor
    tensors = np.maximum(np.asarray(layer_tensors, dtype=np.float64), 1.0)
    k_g = np.where(sync, tensors, np.maximum(np.ceil(layer_params / prof.zero3_gather_bucket_params), 1.0))
    k_r = np.where(sync, tensors, np.maximum(np.ceil(layer_params / prof.zero3_reduce_bucket_params), 1.0))
    layer_bytes = layer_params * WEIGHT_BYTES
    gather = k_g * groups.time(CollectiveKind.ALL_GATHER, layer_bytes / k_g, ParallelGroup.SHARD)
    reduce_scatter = k_r * groups.time(CollectiveKind.REDUCE_SCATTER, layer_bytes / k_r, ParallelGroup.SHARD)
    # synchronous gathers hold the GPU for their launch too (torch.cuda.synchronize after each, DeepSpeed PR #1188)
    active = z3 & (shape.zero_shard_ranks > 1)
    sync_gathers = np.where(sync & active, ZERO3_GATHERS_PER_LAYER * (gather + k_g * COLLECTIVE_LAUNCH_S), 0.0)
    per_layer = np.where(sync, sync_gathers, ZERO3_GATHERS_PER_LAYER * gather) + reduce_scatter
    vocab_gather = groups.time(CollectiveKind.ALL_GATHER, vocab_params * WEIGHT_BYTES, ParallelGroup.SHARD)
    vocab = ZERO3_VOCAB_COLLECTIVES * vocab_gather
    per_mb = np.where(active, shape.stage_layers * per_layer + vocab, 0.0)
    launches = np.where(active, (shape.stage_layers * (ZERO3_GATHERS_PER_LAYER * k_g + k_r) + ZERO3_VOCAB_COLLECTIVES)
                        * COLLECTIVE_LAUNCH_S, 0.0)
    prefetched = per_layer / np.maximum(prof.zero3_prefetch_layers, 1.0)
    floor = np.where(z3, np.where(sync, shape.stage_layers * sync_gathers, prefetched), 0.0)
    hideable = per_mb - np.where(sync, floor, 0.0)
    exposed = np.where(sync, np.maximum(0.0, hideable - compute_s) + floor,
                       np.maximum(0.0, np.maximum(per_mb, launches) - compute_s) + floor)
    return Zero3Traffic(layer_gather_s=gather, layer_reduce_scatter_s=reduce_scatter, per_layer_s=per_layer,
                        gathers_per_layer_count=k_g, reduce_scatters_per_layer_count=k_r, launch_s=launches,
                        vocab_s=vocab, per_microbatch_s=per_mb, floor_s=floor, exposed_s=exposed)


def zero2_traffic(prof: LayoutProfiles, grad_reduction_s: Seconds, per_microbatch: BoolArr, bucket_fraction: Ratio,
                  backward_s: Seconds) -> Zero2Traffic:
    """ZeRO-2's reduce-scatter at every micro-batch (``per_microbatch``: where the layout reduces so), under the
    micro-batch's backward ``backward_s`` where the framework overlaps it; the last bucket stays exposed."""
    per_mb = np.where(per_microbatch, grad_reduction_s, 0.0)
    floor = np.where(prof.grad_overlap, bucket_fraction, 1.0) * per_mb
    exposed = np.maximum(per_mb - np.where(prof.grad_overlap, backward_s, 0.0), floor)
    return Zero2Traffic(per_microbatch_s=per_mb, floor_s=floor, exposed_s=exposed)
