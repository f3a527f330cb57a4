"""FLOP counts: per token (forward) and per step (model FLOPs for MFU, hardware FLOPs with recomputation).

Non-causal attention convention (Megatron, PaLM: what MFU figures in the literature use); a multiply-add is 2.
docs/performance-model.md s.1. For GPT (g = a, k = 2, f = 4h) the step count is Narayanan et al.'s (SC21)
72 B s L h^2 (1 + s/6h + V/12Lh). Multi-token-prediction modules (model.mtp_layers) count as Megatron-LM counts
them: layers of the last layer's kind, their projections and one more pass of the output head each.
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
# A multi-token-prediction module projects the concatenation of two h-wide normed inputs (its previous depth's hidden
# state and the next token's embedding) back to h: a 2h x h matrix (DeepSeek-V3 Sec. 2.2, M_k; Megatron-Core eh_proj).
MTP_PROJECTION_INPUTS_PER_H = 2.0


@dataclass(frozen=True)
class TokenFlops:
    """Forward FLOPs per token."""

    layers_flops: float  # all transformer layers
    attention_core_flops: float  # the attention core of all layers (QK^T and AV)
    logits_flops: float  # output layer
    mtp_flops: float  # multi-token-prediction modules (model.mtp_layers; terms/mtp.py)
    forward_flops: float  # layers + logits + MTP modules


@dataclass(frozen=True)
class StepFlops:
    model_flops: Flops  # 3 x forward x tokens per step (MFU's numerator)
    hardware_flops: Flops  # + recomputed forward work (HFU's numerator)


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs per token of one layer's parts."""

    attention_projections: float  # Q, K, V and output projections (MLA: down-, up- and output projections)
    attention_core: float  # QK^T and AV over min(window, s) keys, the layers' mix of windowed and global
    dense_ffn: float  # a dense layer's FFN
    moe_ffn: float  # an MoE layer's active experts (routed top-k + shared) and router; 0 for a dense model


def layer_flops(ctx: Context) -> LayerFlops:
    h = ctx.hidden
    moe_ffn = (FLOPS_PER_MAC * ctx.mats * h * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts)
               + FLOPS_PER_MAC * h * ctx.experts) if ctx.moe else 0.0
    return LayerFlops(attention_projections=FLOPS_PER_MAC * (ctx.attn.sharded_macs + ctx.attn.replicated_macs),
                      attention_core=ATTN_CORE_FLOPS_PER_SEQ_ELEM * ctx.attn_keys * ctx.attn.core,
                      dense_ffn=FLOPS_PER_MAC * ctx.mats * h * ctx.dense_ffn, moe_ffn=moe_ffn)


def flops_per_token(ctx: Context) -> TokenFlops:
    f = layer_flops(ctx)
    n_moe = ctx.layers - ctx.dense_layers if ctx.moe else 0.0
    n_dense = ctx.layers - n_moe
    layers_fwd = ctx.layers * (f.attention_projections + f.attention_core) + n_dense * f.dense_ffn + n_moe * f.moe_ffn
    logits = logits_flops(ctx)
    mtp = mtp_forward_flops(ctx)
    return TokenFlops(layers_flops=layers_fwd, attention_core_flops=ctx.layers * f.attention_core,
                      logits_flops=logits, mtp_flops=mtp, forward_flops=layers_fwd + logits + mtp)


def logits_flops(ctx: Context) -> float:
    """Forward FLOPs per token of the output layer: 2 h V."""
    return FLOPS_PER_MAC * ctx.hidden * ctx.vocab


def mtp_layer_flops(ctx: Context) -> float:
    """Forward FLOPs per token of one multi-token-prediction module's transformer layer: a layer of the model's last
    kind (an MoE layer in an MoE model, as Megatron-LM counts it: training.py num_floating_point_operations adds the
    MTP layers to the MoE or the dense layers by the last layer's kind)."""
    f = layer_flops(ctx)
    return f.attention_projections + f.attention_core + (f.moe_ffn if ctx.moe else f.dense_ffn)


def mtp_forward_flops(ctx: Context) -> float:
    """Forward FLOPs per token of the D = model.mtp_layers modules: each its transformer layer, its projection of
    the two normed inputs (2h -> h: 2 x 2h^2) and the shared output head again (2 h V). The RMSNorms (3h per module
    in Megatron-LM's count) are left out with every other norm."""
    if not ctx.mtp_layers:
        return 0.0
    return ctx.mtp_layers * (mtp_recomputed_flops(ctx) + logits_flops(ctx))


def mtp_recomputed_flops(ctx: Context) -> float:
    """Forward FLOPs per token of one module's checkpointed part: its projection (2 x 2h^2) and its layer (the output
    head and loss are not checkpointed with them)."""
    return mtp_layer_flops(ctx) + FLOPS_PER_MAC * MTP_PROJECTION_INPUTS_PER_H * ctx.hidden ** 2


def step_flops(ctx: Context, recompute: Arr, unfused: BoolArr, full_share: Arr | float = 1.0,
               mtp_rerun: Arr | float = 0.0) -> StepFlops:
    """Model and hardware FLOPs per step. ``full`` recomputes the forward of ``full_share`` of the layers (all, or
    training.recompute_layers per chunk: shape.full_recompute_share) and, where ``mtp_rerun`` is 1 (terms/mtp.
    mtp_reruns: the stack checkpoints them), each multi-token-prediction module's projection and layer; ``selective``
    recomputes no GEMM, only the unfused attention core's score GEMMs (``unfused``: terms.attention.
    unfused_attention)."""
    f = flops_per_token(ctx)
    tokens = ctx.global_batch * ctx.seq
    model = TRAINING_PASSES * f.forward_flops * tokens
    sel = np.where(unfused, f.attention_core_flops, 0.0)
    modules = ctx.mtp_layers * mtp_recomputed_flops(ctx) if ctx.mtp_layers else 0.0
    extra = np.where(recompute >= RECOMPUTE_FULL, full_share * f.layers_flops + mtp_rerun * modules,
                     np.where(recompute >= RECOMPUTE_SELECTIVE, sel, 0.0))
    return StepFlops(model_flops=np.full_like(recompute, model), hardware_flops=model + extra * tokens)
