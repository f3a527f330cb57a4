"""FLOP counts: per token (forward) and per step (model FLOPs for MFU, hardware FLOPs with recomputation).

Non-causal attention convention (Megatron, PaLM: what MFU figures in the literature use); a multiply-add is 2.
docs/performance-model.md s.1. For GPT (g = a, k = 2, f = 4h) the step count is Narayanan et al.'s (SC21)
72 B s L h^2 (1 + s/6h + V/12Lh).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance.context import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, Context
from engine.performance.terms.kernels import BWD_GEMM_FACTOR, FLOPS_PER_MAC
from engine.units import Arr, BoolArr, Flops

# Attention core per token: Q K^T and A V, each s x ad multiply-adds per token: 2 GEMMs x 2 FLOPs = 4 s ad (MLA:
# s a (d_n + d_r) + s a d_v = 2 s x AttentionWidths.core).
ATTN_CORE_FLOPS_PER_SEQ_ELEM = 2.0 * FLOPS_PER_MAC
# A training step runs every GEMM forward and backward (backward = 2 x forward): 3 forwards.
TRAINING_PASSES = 1.0 + BWD_GEMM_FACTOR


@dataclass(frozen=True)
class TokenFlops:
    """Forward FLOPs per token."""

    layers_flops: float  # all transformer layers
    attention_core_flops: float  # the attention core of all layers (QK^T and AV)
    logits_flops: float  # output layer
    forward_flops: float  # layers + logits


@dataclass(frozen=True)
class StepFlops:
    model_flops: Flops  # 3 x forward x tokens per step (MFU's numerator)
    hardware_flops: Flops  # + recomputed forward work (HFU's numerator)


def flops_per_token(ctx: Context) -> TokenFlops:
    h = ctx.hidden
    # Q, K, V and output projections (MLA: down-projections, up-projections, output projection)
    attn_proj = FLOPS_PER_MAC * (ctx.attn.sharded_macs + ctx.attn.replicated_macs)
    attn_core = ATTN_CORE_FLOPS_PER_SEQ_ELEM * ctx.attn_keys * ctx.attn.core  # min(window, s) keys per query
    dense_ffn = FLOPS_PER_MAC * ctx.mats * h * ctx.dense_ffn
    if ctx.moe:
        moe_ffn = (FLOPS_PER_MAC * ctx.mats * h * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts)
                   + FLOPS_PER_MAC * h * ctx.experts)  # active experts + router
        n_moe = ctx.layers - ctx.dense_layers
    else:
        moe_ffn = 0.0
        n_moe = 0.0
    n_dense = ctx.layers - n_moe
    layers_fwd = ctx.layers * (attn_proj + attn_core) + n_dense * dense_ffn + n_moe * moe_ffn
    logits = FLOPS_PER_MAC * h * ctx.vocab
    return TokenFlops(layers_flops=layers_fwd, attention_core_flops=ctx.layers * attn_core, logits_flops=logits,
                      forward_flops=layers_fwd + logits)


def step_flops(ctx: Context, recompute: Arr, unfused: BoolArr, full_share: Arr | float = 1.0) -> StepFlops:
    """Model and hardware FLOPs per step. ``full`` recomputes the forward of ``full_share`` of the layers (all, or
    training.recompute_layers per chunk: shape.full_recompute_share); ``selective`` recomputes no GEMM, only the
    unfused attention core's score GEMMs (``unfused``: terms.attention.unfused_attention)."""
    f = flops_per_token(ctx)
    tokens = ctx.global_batch * ctx.seq
    model = TRAINING_PASSES * f.forward_flops * tokens
    sel = np.where(unfused, f.attention_core_flops, 0.0)
    extra = np.where(recompute >= RECOMPUTE_FULL, full_share * f.layers_flops,
                     np.where(recompute >= RECOMPUTE_SELECTIVE, sel, 0.0))
    return StepFlops(model_flops=np.full_like(recompute, model), hardware_flops=model + extra * tokens)
