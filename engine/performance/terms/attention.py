"""The attention core (softmax(QK^T) V) of one layer, one micro-batch, one GPU: fused or unfused kernels.

Fused (FlashAttention-2 class or the architecture-native class: cuDNN, FlashAttention-3/4): causal kernels do half of
the counted FLOPs at the class's measured fraction of bf16 peak (Context.fused_attn_eff: hardware attn_eff or
attn_eff_native), backward 2.5 x forward; with context parallelism each ring step runs on a key block of s/c
tokens at a lower rate. Unfused (scores in HBM, Megatron-LM 2021-22): batched score GEMMs plus HBM passes over the score tensor.
docs/performance-model.md s.2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance import hardware as hw
from engine.performance.context import Context, Layouts
from engine.performance.terms.flops import ATTN_CORE_FLOPS_PER_SEQ_ELEM
from engine.performance.terms.kernels import BWD_GEMM_FACTOR, gemm_time, hbm_time, launches
from engine.performance.terms.shape import LayoutShape
from engine.units import BoolArr, Count, Ratio, Seconds

# Fused attention kernels lose throughput on short key blocks (FlashAttention-2 Fig. 4, FlashAttention-3 Fig. 5:
# about 0.85 of the 2K-token rate at 1K tokens, 0.65 at 512): rate ~ L / (L + 440) relative to L = 2,048 (the
# block length attn_eff was measured at), never below 0.5 (blocks shorter than the figures show).
ATTN_HALF_LEN = 440.0
ATTN_REFERENCE_LEN = 2048.0
ATTN_MIN_BLOCK_RATE = 0.5
# The architecture-native kernels (cuDNN, FlashAttention-3/4) keep gaining past 2K tokens: rate ~ L / (L + L_h)
# relative to L = 8,192 (the length attn_eff_native is measured at), L_h per family (hardware.attn_native_half_len),
# no ceiling or floor (the curve holds the measured rows from 2K to 32K within 4%, and B200's 512-token row within 15%).
NATIVE_REFERENCE_LEN = 8192.0
# FlashAttention-2 backward takes 2.5 x its forward (it recomputes P and runs 5 GEMM-like passes to the
# forward's 2: Dao 2023).
ATTN_BWD_FACTOR = 2.5
# One forward kernel pair (attention + the online-softmax merge) per ring step of context parallelism.
ATTN_KERNELS_PER_BLOCK = 2.0
# Unfused: scale-mask-softmax and dropout, one kernel each, forward; their two gradient kernels backward.
UNFUSED_SCORE_KERNELS = 2.0


@dataclass(frozen=True)
class AttentionCore:
    unfused: BoolArr  # scores materialised (unfused kernel stack and no context parallelism)
    block_rate_factor: Ratio  # fused kernel rate on s/c-token blocks relative to 2K-token blocks
    fused_forward_s: Seconds
    unfused_forward_s: Seconds
    unfused_backward_s: Seconds
    forward_s: Seconds
    backward_s: Seconds


def unfused_attention(ctx: Context, cp: Count) -> BoolArr:
    """True where the layout materialises attention scores: the stack's attention is unfused. Context parallelism
    does not switch the kernel (ring attention needs fused kernels, so the search gives an unfused stack no CP:
    api._attention_layouts)."""
    return np.asarray(np.full(np.shape(cp), ctx.unfused_attn, dtype=bool))


def short_block_rate(block_tokens: Count) -> Ratio:
    """Fused-attention rate on key blocks of ``block_tokens`` relative to the 2K-token rate ``attn_eff`` holds."""
    reference = ATTN_REFERENCE_LEN / (ATTN_REFERENCE_LEN + ATTN_HALF_LEN)
    return np.clip((block_tokens / (block_tokens + ATTN_HALF_LEN)) / reference, ATTN_MIN_BLOCK_RATE, 1.0)


def native_block_rate(block_tokens: Count, half_len: float) -> Ratio:
    """Native-kernel rate on key blocks of ``block_tokens`` relative to the 8K-token rate ``attn_eff_native`` holds:
    (L / (L + L_h)) / (8192 / (8192 + L_h))."""
    return (block_tokens / (block_tokens + half_len)) / (NATIVE_REFERENCE_LEN / (NATIVE_REFERENCE_LEN + half_len))


def block_rate(ctx: Context, block_tokens: Count) -> Ratio:
    """The fused kernel class's rate on ``block_tokens``-long key blocks relative to its reference rate."""
    if ctx.fused_attn_half_len > 0:
        return native_block_rate(block_tokens, ctx.fused_attn_half_len)
    return short_block_rate(block_tokens)


def fused_attention_forward(ctx: Context, lay: Layouts, shape: LayoutShape) -> tuple[Seconds, Ratio]:
    """(forward time, block-rate factor) of the fused kernel, averaged over the layers' attention kinds: causal half
    of the counted FLOPs at the family's measured rate of the kernel class (Context.fused_attn_eff; bf16 also in fp8
    training), one kernel pair per ring step."""
    reference_rate = ctx.gpu.peak_bf16_flops * ctx.fused_attn_eff
    per_query = ATTN_CORE_FLOPS_PER_SEQ_ELEM * shape.microbatch_tokens * ctx.attn.core / lay.tp
    work = time = np.zeros_like(np.asarray(lay.tp, dtype=np.float64))
    # each kind of layer (Context.attention_kinds: windowed, full) by its share: the keys a causal kernel visits per
    # query (s/2, hardware.ATTN_CAUSAL_WORK, or w(1 - w/2s) with a window) at the rate of its key range (the
    # window or the CP block)
    blocks = kernel_key_blocks(ctx, lay)
    for share, keys, causal_keys in ctx.attention_kinds:
        kind_work = share * per_query * causal_keys
        work = work + kind_work
        time = time + kind_work / (reference_rate * block_rate(ctx, np.minimum(keys, ctx.seq / blocks)))
    rate_factor = work / (reference_rate * time)  # the layers' work-weighted rate relative to the reference
    return time + launches(ATTN_KERNELS_PER_BLOCK * blocks), rate_factor


def kernel_key_blocks(ctx: Context, lay: Layouts) -> Count:
    """Key blocks the fused kernel runs per layer and micro-batch [count]: the ring's c blocks of s/c keys (one
    kernel pair per ring step; the all-gather form's kernel too is split by the gathered blocks), or one block of
    the whole sequence with the all-to-all (Ulysses) form, which attends over all s keys with 1/c of the heads."""
    return np.where(ctx.cp_a2a, 1.0, lay.cp)


def unfused_attention_time(ctx: Context, lay: Layouts) -> tuple[Seconds, Seconds]:
    """(forward, backward) of the unfused path: batched QK^T and AV GEMMs over all s x s positions (no causal
    skipping) plus HBM passes over the b a/t s^2 score tensor (hardware.UNFUSED_SCORE_BYTES_FWD / _BWD)."""
    ones = np.ones_like(lay.tp)
    heads_local = ctx.heads / np.minimum(lay.tp, ctx.heads)
    q_len = ctx.seq / lay.cp
    cnt = lay.mb * heads_local
    d = ctx.attn.head_core
    t_sc = (gemm_time(ctx, q_len, d * ones, ctx.seq * ones, cnt, bf16=True)
            + gemm_time(ctx, q_len, ctx.seq * ones, d * ones, cnt, bf16=True))
    score_elems = cnt * q_len * ctx.seq
    fwd = t_sc + hbm_time(ctx, hw.UNFUSED_SCORE_BYTES_FWD * score_elems) + launches(UNFUSED_SCORE_KERNELS)
    bwd = (BWD_GEMM_FACTOR * t_sc + hbm_time(ctx, hw.UNFUSED_SCORE_BYTES_BWD * score_elems)
           + launches(UNFUSED_SCORE_KERNELS))
    return fwd, bwd


def attention_core(ctx: Context, lay: Layouts, shape: LayoutShape) -> AttentionCore:
    unf = unfused_attention(ctx, lay.cp)
    if ctx.unfused_attn:
        u_fwd, u_bwd = unfused_attention_time(ctx, lay)
    else:
        u_fwd = u_bwd = np.zeros_like(lay.tp)
    f_fwd, rate_factor = fused_attention_forward(ctx, lay, shape)  # layouts with context parallelism use it
    return AttentionCore(unfused=unf, block_rate_factor=rate_factor, fused_forward_s=f_fwd, unfused_forward_s=u_fwd,
                         unfused_backward_s=u_bwd, forward_s=np.where(unf, u_fwd, f_fwd),
                         backward_s=np.where(unf, u_bwd, ATTN_BWD_FACTOR * f_fwd))
