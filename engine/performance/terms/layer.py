"""One transformer layer's compute on one GPU for one micro-batch: forward, backward, recomputation; and the
output layer (logits and loss). docs/performance-model.md s.2."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance import hardware as hw
from engine.performance.attention_widths import KV_TENSORS
from engine.performance.context import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, Context, Layouts
from engine.performance.datatypes import BF16_BYTES, BYTES_ACT, FP8_BYTES, FP8_TILE_SCALE_BYTES, FP32_BYTES
from engine.performance.terms.attention import AttentionCore
from engine.performance.terms.block import stage_share
from engine.performance.terms.ffn import DenseFfn, MoeFfn
from engine.performance.terms.kernels import (
    BWD_GEMM_FACTOR,
    gemm_time,
    hbm_time,
    launches,
    low_precision_linear_share,
    output_layer_bf16,
)
from engine.performance.terms.mla import mla_projections, mla_up_projections
from engine.performance.terms.shape import LayoutShape, dense_fraction, full_recompute_share, mix
from engine.schema.enums import Precision, RecomputeModule
from engine.units import Count, Seconds

# fp8 (Transformer Engine recipe): every GEMM operand is cast with its transpose (hardware.FP8_CAST_BYTES).
# Forward: the inputs of the output projection and FFN-out (the QKV and FFN-in casts are fused into the
# preceding layernorm): 2 kernels. Backward: the output gradient of every GEMM (QKV, output projection, FFN-in,
# FFN-out): 4 kernels, of which the output projection and FFN-out gradients are h wide - one per block stage
# (terms/block.stage_share: the parallel block's two branches get the same output gradient, cast once).
FP8_CAST_KERNELS_FWD = 2.0
FP8_CAST_KERNELS_BWD = 4.0
FP8_H_WIDE_GRADS = 2.0
# Backward moves twice the forward's elementwise traffic (read the saved input and the output gradient).
BWD_EW_FACTOR = 2.0
# Selective recomputation, by module (training.recompute_modules; default everything except GEMMs: Korthikanti et
# al. 2022, Megatron-Core --recompute-modules layernorm moe_act core_attn): the two layernorm outputs (read + write
# h each: 4h elements, 2 kernels), the FFN activation output (1 kernel), the unfused attention core; "mlp" redoes
# the FFN's forward GEMMs as well. Layernorm figures are the serial block's two; the parallel block has one
# (terms/block.stage_share).
SELECTIVE_LN_ELEMS_PER_H = 4.0
SELECTIVE_LN_KERNELS = 2.0  # the two layernorms (training.recompute_modules "layernorm")
SELECTIVE_ACT_KERNELS = 1.0  # the FFN activation function ("activation"; "mlp" recomputes it with the FFN GEMMs)
# Loss on fp32 logits: softmax, loss and gradient passes over the M x V/t logits, 4 passes of 4 bytes.
LOSS_PASSES = 4.0


@dataclass(frozen=True)
class LayerCompute:
    """Per layer and micro-batch on the bottleneck rank, averaged over dense and MoE layers."""

    attention_gemms_s: Seconds  # QKV and output projection
    gemm_forward_s: Seconds  # attention GEMMs + FFN GEMMs
    elementwise_forward_s: Seconds
    fp8_cast_forward_s: Seconds
    fp8_cast_backward_s: Seconds
    forward_s: Seconds
    backward_s: Seconds  # 2 x GEMM, 2.5 x attention (fused), 2 x elementwise, + casts
    selective_recompute_s: Seconds  # what selective recomputation costs (applied when chosen)
    recompute_s: Seconds  # full: the forward; selective: the above; none: 0
    total_s: Seconds  # forward + backward + recompute


@dataclass(frozen=True)
class LogitsCompute:
    gemm_s: Seconds  # (M x h) @ (h x V/t), forward
    loss_s: Seconds  # fp32 softmax / cross-entropy passes
    total_s: Seconds  # forward + backward GEMMs + loss


def attention_gemms(ctx: Context, lay: Layouts, shape: LayoutShape) -> Seconds:
    """The attention's projection GEMMs, forward [s]: QKV (MLA: down- and up-projections, terms.mla) and the
    output projection (M x a d_v / t) @ (a d_v / t x h)."""
    ones = np.ones_like(lay.tp)
    m_tok, h = shape.microbatch_tokens, ctx.hidden
    qkv = (mla_projections(ctx, lay, shape) if ctx.attn.mla
           else gemm_time(ctx, m_tok, h * ones, (ctx.attn.q / lay.tp + KV_TENSORS * shape.kv_local_elems)))
    return qkv + gemm_time(ctx, m_tok, ctx.attn.o / lay.tp, h * ones)


def cast_bytes_per_elem(ctx: Context) -> float:
    """HBM bytes per cast element of the run's GEMM format (hardware.FP8_CAST_BYTES, MXFP8_CAST_BYTES,
    NVFP4_CAST_BYTES) times the quantised share of the linear layers; 0 in bf16."""
    per = {Precision.MXFP8: hw.MXFP8_CAST_BYTES, Precision.NVFP4: hw.NVFP4_CAST_BYTES}.get(ctx.precision,
                                                                                       hw.FP8_CAST_BYTES)
    return per * low_precision_linear_share(ctx)


def fp8_ffn_cache_pass_bytes(ctx: Context) -> float:
    """HBM bytes per FFN-in output element of one pass of the fp8 activation cache (training.activation_cache):
    read bf16 (2 B), write fp8 with its tile scale (1 + 4/128 B) - or the reverse to dequantise. 0 when the cache
    is bf16."""
    return BF16_BYTES + FP8_BYTES + FP8_TILE_SCALE_BYTES if ctx.fp8_ffn_cache else 0.0


def fp8_casts(ctx: Context, lay: Layouts, shape: LayoutShape) -> tuple[Seconds, Seconds]:
    """(forward, backward) time of Transformer Engine's cast-transposes (fp8, MXFP8, NVFP4 quantisation); zero in
    bf16."""
    if ctx.elem_bytes >= BF16_BYTES:
        zeros = np.zeros_like(lay.tp)
        return zeros, zeros
    cast_bytes = cast_bytes_per_elem(ctx)
    tp, f = lay.tp, shape.moe_layer_fraction
    a = ctx.attn
    f_eff = dense_fraction(shape) * ctx.dense_ffn + f * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts)
    # training.activation_cache fp8: the FFN-in outputs are quantised once forward and dequantised once backward
    cache = fp8_ffn_cache_pass_bytes(ctx) * (ctx.mats - 1.0) * f_eff / tp
    h_wide = FP8_H_WIDE_GRADS * stage_share(ctx)  # output gradients of the output projection and FFN-out
    cast_fwd = cast_bytes * (a.o / tp + f_eff / tp) + cache
    cast_bwd = cast_bytes * ((a.q + a.k_v) / tp + h_wide * ctx.hidden
                                    / shape.sequence_shard_ranks + (ctx.mats - 1.0) * f_eff / tp) + cache
    m_tok = shape.microbatch_tokens
    return (hbm_time(ctx, m_tok * cast_fwd) + launches(FP8_CAST_KERNELS_FWD),
            hbm_time(ctx, m_tok * cast_bwd) + launches(FP8_CAST_KERNELS_BWD - FP8_H_WIDE_GRADS + h_wide))


def selective_recompute(ctx: Context, lay: Layouts, shape: LayoutShape, attn: AttentionCore, ffn_gemm_s: Seconds,
                        activation_elems: Count) -> Seconds:
    """What selective recomputation costs per layer and micro-batch, module by module (ctx.recompute_modules):
    layernorm = an HBM pass over the two layernorm outputs (4h / sp elements per token) + 2 launches (one layernorm,
    2h and 1 launch, in the parallel block: terms/block.stage_share); activation =
    a pass over the FFN activation's elements + 1 launch; core_attn = the attention core's forward where it is
    unfused (a fused kernel stores no scores to drop); mlp = the FFN's forward GEMMs + its activation; mla_up_proj =
    MLA's up-projection GEMMs (terms.mla)."""
    mods = ctx.recompute_modules
    m_tok = shape.microbatch_tokens
    out = np.zeros_like(np.asarray(m_tok, dtype=np.float64))
    if RecomputeModule.LAYERNORM in mods:
        share = stage_share(ctx)
        out = out + hbm_time(ctx, m_tok * BYTES_ACT * SELECTIVE_LN_ELEMS_PER_H * share * ctx.hidden
                             / shape.sequence_shard_ranks) + launches(SELECTIVE_LN_KERNELS * share)
    if RecomputeModule.ACTIVATION in mods or RecomputeModule.MLP in mods:
        out = out + hbm_time(ctx, m_tok * BYTES_ACT * activation_elems) + launches(SELECTIVE_ACT_KERNELS)
    if RecomputeModule.MLP in mods:
        out = out + ffn_gemm_s
    if RecomputeModule.CORE_ATTN in mods:
        out = out + np.where(attn.unfused, attn.forward_s, 0.0)
    if RecomputeModule.MLA_UP_PROJ in mods and ctx.attn.mla:
        out = out + mla_up_projections(ctx, lay, shape)
    return out


def layer_compute(ctx: Context, lay: Layouts, shape: LayoutShape, attn: AttentionCore, dense: DenseFfn,
                  moe: MoeFfn) -> LayerCompute:
    f, rc = shape.moe_layer_fraction, lay.recompute
    t_attn_gemm = attention_gemms(ctx, lay, shape)
    gemm_fwd = t_attn_gemm + dense_fraction(shape) * dense.gemm_s + f * moe.gemm_s
    ew_fwd = mix(shape, dense.elementwise_s, moe.elementwise_s)
    cast_fwd, cast_bwd = fp8_casts(ctx, lay, shape)
    fwd = gemm_fwd + attn.forward_s + ew_fwd + cast_fwd
    bwd = BWD_GEMM_FACTOR * gemm_fwd + attn.backward_s + BWD_EW_FACTOR * ew_fwd + cast_bwd
    sel = selective_recompute(ctx, lay, shape, attn, ffn_gemm_s=gemm_fwd - t_attn_gemm,
                              activation_elems=mix(shape, dense.activation_elems, moe.activation_elems))
    rc_s = np.where(rc >= RECOMPUTE_FULL, full_recompute_share(ctx, lay) * fwd,
                    np.where(rc >= RECOMPUTE_SELECTIVE, sel, 0.0))
    return LayerCompute(attention_gemms_s=t_attn_gemm, gemm_forward_s=gemm_fwd, elementwise_forward_s=ew_fwd,
                        fp8_cast_forward_s=cast_fwd, fp8_cast_backward_s=cast_bwd, forward_s=fwd, backward_s=bwd,
                        selective_recompute_s=sel, recompute_s=rc_s, total_s=fwd + bwd + rc_s)


def tp_linear_backward_gemms(layer: LayerCompute, dense: DenseFfn, moe: MoeFfn,
                             shape: LayoutShape) -> tuple[Seconds, Seconds]:
    """The backward GEMMs (data and weight gradients: BWD_GEMM_FACTOR x the forward) of a layer's tensor-parallel
    linears, per side [s]: the attention projections; the FFN side's dense FFN (dense layers) and shared experts
    (MoE layers; routed experts excluded: their collectives are the dispatcher's). The windows Megatron's
    asynchronous backward collectives of each side run beside (terms/tensor_parallel)."""
    f = shape.moe_layer_fraction
    return (BWD_GEMM_FACTOR * layer.attention_gemms_s,
            BWD_GEMM_FACTOR * (dense_fraction(shape) * dense.gemm_s + f * moe.shared_s))


def logits_compute(ctx: Context, lay: Layouts, shape: LayoutShape) -> LogitsCompute:
    m_tok = shape.microbatch_tokens
    gemm = gemm_time(ctx, m_tok, ctx.hidden * np.ones_like(lay.tp), ctx.vocab / lay.tp, bf16=output_layer_bf16(ctx))
    loss = hbm_time(ctx, m_tok * ctx.vocab / lay.tp * LOSS_PASSES * FP32_BYTES)
    return LogitsCompute(gemm_s=gemm, loss_s=loss, total_s=(1.0 + BWD_GEMM_FACTOR) * gemm + loss)
