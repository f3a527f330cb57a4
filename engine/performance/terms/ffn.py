"""The feed-forward block of one layer, one micro-batch, one GPU (forward): dense FFN or routed experts, and the
layer's memory-bound (elementwise) traffic. docs/performance-model.md s.2."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import Context, Layouts
from engine.performance.datatypes import BYTES_ACT
from engine.performance.terms.block import elementwise_kernels_saved, replicated_elementwise_per_h
from engine.performance.terms.kernels import gemm_time, hbm_time, launches
from engine.performance.terms.moe_balance import busiest_rank_factor
from engine.performance.terms.shape import LayoutShape
from engine.units import Count, Ratio, Seconds

# Elementwise traffic per token per layer, forward, in units of h elements: the layernorms and the dropout +
# residual adds (terms/block.replicated_elementwise_per_h: 12h for the serial block, 8h for the parallel one);
# divided by t only with sequence parallelism. The FFN activation adds k f / t (GeLU: read + write f; SwiGLU: read
# 2f, write f).
# Memory-bound kernel launches per dense layer forward of the serial block (the passes above; a count, not fitted);
# the parallel block makes terms/block.elementwise_kernels_saved fewer.
DENSE_EW_KERNELS = 6.0
# MoE token permutation: each routed copy is permuted before the experts and un-permuted after (2 passes of h).
MOE_PERMUTE_PASSES = 2.0
# All-gather dispatcher: the gathered [S B e, h] buffer is zero-filled, scattered into and reduced (2 passes of h).
ALLGATHER_BUFFER_PASSES = 2.0


@dataclass(frozen=True)
class DenseFfn:
    gemm_s: Seconds  # FFN-in (k-1 matrices) and FFN-out GEMMs
    elementwise_s: Seconds  # the layer's memory-bound passes
    replicated_elems: Count  # elementwise elements per token outside the TP regions
    activation_elems: Count  # FFN activation elements per token per rank


@dataclass(frozen=True)
class MoeFfn:
    busiest_rank_factor: Ratio  # load of the busiest EP rank relative to the mean (moe_balance.py)
    expert_tokens: Count  # tokens per local expert on the busiest rank
    routed_s: Seconds  # routed-expert grouped GEMMs
    shared_s: Seconds  # shared experts (dense GEMMs)
    router_s: Seconds
    gemm_s: Seconds  # routed + shared + router
    elementwise_s: Seconds  # memory-bound passes of an MoE layer (busiest rank)
    activation_elems: Count  # expert activation elements per token per rank (mean load; what selective recomputes)
    permute_elems: Count  # token permutation (and all-gather buffer) elements per token


def replicated_elems(ctx: Context, shape: LayoutShape) -> Count:
    return replicated_elementwise_per_h(ctx) * ctx.hidden / shape.sequence_shard_ranks


def ffn_gemm_time(ctx: Context, ffn: float, tokens: Count, tp: Count, count: Count | float = 1.0,
                  kernel_eff: float = 1.0) -> Seconds:
    """FFN-in ((k-1) f / t wide: gate and up for SwiGLU) and FFN-out (f / t deep) GEMMs of ``tokens`` tokens."""
    ones = np.ones_like(tp)
    h = ctx.hidden
    return (gemm_time(ctx, tokens, h * ones, (ctx.mats - 1.0) * ffn / tp, count, kernel_eff=kernel_eff)
            + gemm_time(ctx, tokens, ffn / tp, h * ones, count, kernel_eff=kernel_eff))


def dense_ffn(ctx: Context, lay: Layouts, shape: LayoutShape) -> DenseFfn:
    m_tok = shape.microbatch_tokens
    rep = replicated_elems(ctx, shape)
    act = (ctx.mats) * ctx.dense_ffn / lay.tp
    return DenseFfn(gemm_s=ffn_gemm_time(ctx, ctx.dense_ffn, m_tok, lay.tp),
                    elementwise_s=hbm_time(ctx, m_tok * BYTES_ACT * (rep + act))
                    + launches(DENSE_EW_KERNELS - elementwise_kernels_saved(ctx)),
                    replicated_elems=rep, activation_elems=act)


def moe_ffn(ctx: Context, lay: Layouts, shape: LayoutShape) -> MoeFfn:
    """Routed experts on the busiest EP rank (dropless routing: the most loaded rank sets the pace), on the stack's
    grouped-GEMM kernel class (``ctx.expert_gemm_eff``), plus shared experts and the router; zeros without MoE.

    Routed experts are tensor-parallel over etp ranks (``parallelism.etp``; = t unless MoE parallel folding): an
    expert GEMM is f_e / etp wide and an expert-TP group processes etp / t of an attention-TP group's routed tokens
    (``Layouts.expert_fold``), so a local expert sees M e top_k / E x etp / t tokens. Shared experts stay
    tensor-parallel over t (Megatron-Core's SharedExpertMLP runs on the attention's TP group). The FFN activation
    elements per token, k f_e top_k / t, are the same either way (etp / t of the tokens, each f_e / etp wide)."""
    tp, ep, fold = lay.tp, lay.ep, lay.expert_fold
    zeros = np.zeros_like(tp)
    if not ctx.moe:
        return MoeFfn(busiest_rank_factor=np.ones_like(tp), expert_tokens=zeros, routed_s=zeros, shared_s=zeros,
                      router_s=zeros, gemm_s=zeros, elementwise_s=zeros, activation_elems=zeros, permute_elems=zeros)
    h, m_tok = ctx.hidden, shape.microbatch_tokens
    imb = busiest_rank_factor(ctx.experts, ep, m_tok * ctx.top_k * fold)
    tok_expert = m_tok * ep * ctx.top_k / ctx.experts * fold * imb
    routed = ffn_gemm_time(ctx, ctx.expert_ffn, tok_expert, lay.expert_tp, ctx.experts / ep, ctx.expert_gemm_eff)
    shared = ffn_gemm_time(ctx, ctx.expert_ffn * ctx.shared_experts, m_tok, tp) if ctx.shared_experts > 0 else zeros
    router = gemm_time(ctx, m_tok, h * np.ones_like(tp), ctx.experts * np.ones_like(tp))
    act = ctx.mats * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts) / tp
    act_busy = ctx.mats * ctx.expert_ffn * (ctx.top_k * imb + ctx.shared_experts) / tp
    perm = MOE_PERMUTE_PASSES * ctx.top_k * imb * h / shape.sequence_shard_ranks
    if ctx.allgather_dispatch:
        perm = perm + ALLGATHER_BUFFER_PASSES * ep * fold * h  # the [S B etp e / t, h] buffer of its etp x e group
    ew = hbm_time(ctx, m_tok * BYTES_ACT * (replicated_elems(ctx, shape) + act_busy + perm))
    return MoeFfn(busiest_rank_factor=imb, expert_tokens=tok_expert, routed_s=routed, shared_s=shared, router_s=router,
                  gemm_s=routed + shared + router, elementwise_s=ew, activation_elems=act, permute_elems=perm)
