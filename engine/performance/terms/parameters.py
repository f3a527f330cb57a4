"""Parameter counts: per layer of the model, and per GPU of the bottleneck pipeline stage."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.terms.mtp import mtp_params
from engine.performance.terms.shape import LayoutShape
from engine.units import Count

# Vocabulary matrices on the bottleneck rank: without pipelining one stage holds the input embedding and the
# (untied) output layer; with pipelining the first stage holds the embedding only.
VOCAB_MATRICES_ONE_STAGE = 2.0
VOCAB_MATRICES_PIPELINED = 1.0


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one layer of the model (not split by any parallelism)."""

    attention_params: float
    attention_replicated_params: float  # of which on every TP rank (MLA down-projections)
    dense_ffn_params: float
    expert_params: float  # one expert's FFN


@dataclass(frozen=True)
class GpuParams:
    """Parameters one GPU of the bottleneck stage holds."""

    layer_params: Count  # one layer, averaged over dense and MoE layers (what ZeRO-3 gathers per layer)
    vocab_params: Count  # embedding (and output layer without PP)
    total_params: Count  # the stage's layers + vocabulary (+ the MTP modules: the last rank, the busiest edge)
    expert_params: Count  # of total: routed-expert weights (replicated over the edp expert-data-parallel ranks only)
    tp_duplicated_params: Count  # of total: weights whole on every TP rank (MLA down-projections, the router)
    mtp_params: Count  # of total: what the multi-token-prediction modules add to the last rank (terms/mtp.py)
    mtp_expert_params: Count  # of mtp_params and expert_params: the modules' routed experts


def params_per_layer(ctx: Context) -> LayerParams:
    h = ctx.hidden
    a = ctx.attn  # a linear layer has one weight per multiply-add per token
    return LayerParams(attention_params=a.sharded_macs + a.replicated_macs,
                       attention_replicated_params=a.replicated_macs, dense_ffn_params=ctx.mats * h * ctx.dense_ffn,
                       expert_params=ctx.mats * h * ctx.expert_ffn)


def gpu_params(ctx: Context, lay: Layouts, shape: LayoutShape) -> GpuParams:
    """Routed experts split e ways (E/e local experts) and each etp ways (expert tensor parallelism: t unless MoE
    parallel folding, ``parallelism.etp``), everything else t ways (shared experts included); the router is
    replicated."""
    tp, ep, etp, f = lay.tp, lay.ep, lay.expert_tp, shape.moe_layer_fraction
    p = params_per_layer(ctx)
    h = ctx.hidden
    routed_gpu = ctx.experts / ep * p.expert_params / etp  # one MoE layer's local routed experts
    moe_p_gpu = (ctx.experts / ep + ctx.shared_experts) * p.expert_params / tp + h * ctx.experts
    if np.any(lay.folded):  # routed experts over etp, shared experts over t
        folded = routed_gpu + ctx.shared_experts * p.expert_params / tp + h * ctx.experts
        moe_p_gpu = np.where(lay.folded, folded, moe_p_gpu)
    attn_gpu = (p.attention_params - p.attention_replicated_params) / tp + p.attention_replicated_params
    layer_p_gpu = attn_gpu + (1.0 - f) * p.dense_ffn_params / tp + f * moe_p_gpu
    vocab = ctx.vocab * h / tp * np.where(lay.pp > 1, VOCAB_MATRICES_PIPELINED, VOCAB_MATRICES_ONE_STAGE)
    mtp = mtp_params(ctx, lay, attn_gpu, moe_p_gpu, p.dense_ffn_params / tp, routed_gpu)
    experts = shape.stage_layers * f * routed_gpu + mtp.expert
    total = shape.stage_layers * layer_p_gpu + vocab + mtp.total
    return GpuParams(layer_params=layer_p_gpu, vocab_params=vocab, total_params=total,
                     expert_params=experts, tp_duplicated_params=tp_duplicated_params(ctx, shape),
                     mtp_params=mtp.total, mtp_expert_params=mtp.expert)


def tp_duplicated_params(ctx: Context, shape: LayoutShape) -> Count:
    """Weights of the bottleneck stage held whole on every TP rank whose gradients differ between ranks under
    sequence parallelism (each rank back-propagates its own slice of the sequence): MLA's down-projections
    (Megatron-Core builds them as ``parallel_mode="duplicated"`` linears and marks them ``sequence_parallel``) and
    the MoE router (h x E, ``sequence_parallel`` set in router.py), and those of the multi-token-prediction modules'
    layers (a layer of the last layer's kind each, on the last rank, counted with it as ``total_params`` counts
    their weights). Layernorm weights (2h per layer) are left out, as everywhere in the parameter count."""
    p = params_per_layer(ctx)
    router = ctx.hidden * ctx.experts
    modules = ctx.mtp_layers * (p.attention_replicated_params + (router if ctx.moe else 0.0))
    per_layer = p.attention_replicated_params + shape.moe_layer_fraction * router
    return np.asarray(shape.stage_layers * per_layer + modules, dtype=np.float64)
