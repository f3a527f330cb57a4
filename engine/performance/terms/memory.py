"""Memory per GPU: model states by ZeRO stage and framework, activations of the first pipeline stage, ZeRO-3
buffers, logits. docs/performance-model.md s.6 (equations and sources).

Activations per token per layer (Korthikanti et al. 2022, generalised to GQA / gated FFN / MoE; attention scores are
never stored by a fused kernel, so no 5as^2 term). Replicated part (divided by t only with sequence parallelism):
layernorm inputs 2 x 2h and the QKV and FFN-in GEMM inputs 2 x 2h (8h), with hidden dropout two 1-byte masks (+2h).
The parallel block (model.parallel_block) has one layernorm whose output both GEMMs read: half the layernorm
tensors and fp8 copies (terms/block.stage_share). Sharded part: Q and the attention output 2 x 2qd, K and V 4gd
(MLA: Q, K, V and output at their widths plus the latents, replicated; engine.performance.attention_widths), the
FFN 4f (GeLU) or 6f (SwiGLU). fp8 (Transformer Engine): the GEMMs keep their fp8-cast inputs for the weight
gradient - QKV and FFN-in inputs 1 B (-2h), FFN-out input 1 B (-f); the attention output stays bf16 and the output
projection keeps its own fp8 copy (+qd). MoE: the FFN part per active expert, plus each routed copy of the token
(the experts' input in the dispatch precision and their output kept for the combine's backward, bf16), full width
on every expert-TP rank (etp / t of them per token with MoE parallel folding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.performance import hardware as hw
from engine.performance.context import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, Context, Layouts
from engine.performance.datatypes import BF16_BYTES, BYTES_ACT, FP8_BYTES, FP8_TILE_SCALE_BYTES, FP32_BYTES
from engine.performance.frameworks import LayoutProfiles
from engine.performance.hardware import GpuSpec
from engine.performance.terms.attention import unfused_attention
from engine.performance.terms.block import stage_share
from engine.performance.terms.expert_parallel import dispatch_elem_bytes
from engine.performance.terms.mtp import mtp_activation_bytes
from engine.performance.terms.parameters import GpuParams
from engine.performance.terms.shape import (
    LayoutShape,
    edges_in_split,
    full_recompute_share,
    pipeline_chunk_layers,
)
from engine.performance.terms.sharding import state_bytes, zero3_buffer_bytes
from engine.schema.enums import RecomputeModule
from engine.units import GIGA, Bytes, Count

# Datasheet HBM sizes are binary: an "80 GB" H100 has 81,559 MiB (85.5e9 bytes, nvidia-smi), a "40 GB" A100
# 40,960 MiB, a "141 GB" H200 143,771 MiB. The catalog keeps the marketing figure; the bytes a job can use are that
# figure in GiB less what the driver reserves (81,559 of 81,920 MiB on H100: 0.9956).
HBM_BYTES_PER_CATALOG_GB = 2.0**30 / 1e9 * 0.9956

# Activation bytes per token per layer, in units of h / qd / gd / f (module doc):
ACT_REPLICATED_PER_H = 8.0  # layernorm inputs 2 x 2h + QKV and FFN-in GEMM inputs 2 x 2h
DROPOUT_MASKS_PER_H = 2.0  # two 1-byte hidden-dropout masks
FP8_GEMM_INPUTS_SAVED_PER_H = 2.0  # QKV and FFN-in inputs kept as fp8 (1 B) instead of bf16
FP8_OUTPUT_PROJ_COPY_PER_QD = 1.0  # the output projection's own fp8 input copy
# Q, K, V and the attention output are kept in bf16 (BYTES_ACT each element: AttentionWidths.q, k_v, o); MLA also
# keeps its latents (AttentionWidths.latent_elems, replicated over TP).
FFN_ACT_PER_F = {2.0: 4.0, 3.0: 6.0}  # by FFN matrices: GeLU (FFN-in output + activation 2 x 2f), SwiGLU (3 x 2f)
FP8_FFN_OUT_INPUT_SAVED_PER_F = 1.0  # FFN-out input kept as fp8
# Selective recomputation drops what it regenerates: the layernorm outputs (= QKV and FFN-in GEMM inputs, 2 x 2h;
# fp8 2 x 1h) and the activation output (= FFN-out GEMM input, 2f; fp8 1f).
SELECTIVE_LN_OUTPUT_PER_H = 4.0
SELECTIVE_ACT_OUTPUT_PER_F = 2.0
# Unfused attention keeps softmax output (2 B), dropout mask (1 B) and dropout output (2 B) per score: 5as/t.
UNFUSED_SCORE_BYTES_KEPT = 5.0
# Interleaved warm-up (Megatron): 2(p-1) + (v-1)p chunk-forwards plus one in flight = 2p - 1 micro-batches of
# chunk 0 and p of every other chunk.
CHUNK0_PASSES_PER_STAGE = 2.0
# The last stage holds the output layer's logits for the loss: bf16 logits (2 B) and their fp32 copy (4 B), which
# Megatron's vocab-parallel cross entropy turns into the softmax in place (torch.exp(..., out=)), saves for backward
# and turns into the gradient in place (megatron/core/tensor_parallel/cross_entropy.py,
# _VocabParallelCrossEntropy: save_for_backward(exp_logits, ...), backward grad_input = softmax, mul_): 6 B per
# element at the peak, not two fp32 tensors (8 B, the term before issue #22 item 5).
LOGITS_BYTES_PER_ELEM = BF16_BYTES + FP32_BYTES
# How far the memory model's estimate is from measured peaks, either way: torchtitan's published peaks
# (pytorch/torchtitan docs/performance.md, Table 1, Llama 3.1 8B FSDP on 8 H100, selective op checkpointing:
# 82.4 GiB bf16 and 76.8 GiB Float8 measured against 85.6 and 87.7 GB modelled, -3% and +6%) and the allocator's
# reserve beyond the live tensors (PyTorch caching allocator; expandable segments change it by GBs: pytorch PR
# 96995). A layout within this share of the usable HBM, either side, carries a memory_uncertain note: it may or
# may not fit, and the planner should say so rather than trust the boundary.
MEMORY_MODEL_UNCERTAINTY = 0.10


@dataclass(frozen=True)
class LayerActivations:
    """Activation bytes per token per layer on one GPU (averaged over dense and MoE layers)."""

    stored_bytes: Count  # without recomputation
    selective_saved_bytes: Count  # what selective recomputation drops
    score_bytes: Count  # unfused attention scores (zero when fused or recomputed away)
    kept_bytes: Count  # what the layout's recompute setting keeps


@dataclass(frozen=True)
class MemoryPerGpu:
    states_bytes: Bytes  # weights, gradients, Adam states as ZeRO shards them (the last rank's, with MTP modules)
    zero3_buffer_bytes: Bytes
    in_flight_layer_microbatches: Count  # first stage: layer-micro-batches of activations held
    activation_bytes: Bytes  # first stage (with its logits when there is no pipeline)
    logits_bytes: Bytes
    last_stage_bytes: Bytes  # the last stage's total (its logits, fewer micro-batches in flight); 0 without PP
    total_bytes: Bytes  # the busiest stage


def usable_memory_bytes(gpu: GpuSpec) -> float:
    hbm = gpu.hbm_bytes * HBM_BYTES_PER_CATALOG_GB
    return hbm * (1.0 - hw.MEMORY_FRAGMENTATION) - hw.MEMORY_FIXED_GB * GIGA


def memory_uncertain(total_bytes: Bytes, gpu: GpuSpec) -> Count:
    """True where the modelled memory is within MEMORY_MODEL_UNCERTAINTY of the usable HBM (either side)."""
    usable = usable_memory_bytes(gpu)
    return np.asarray(np.abs(total_bytes - usable) <= MEMORY_MODEL_UNCERTAINTY * usable)


def layer_activations(ctx: Context, lay: Layouts, shape: LayoutShape) -> LayerActivations:
    tp, rc, sp_div = lay.tp, lay.recompute, shape.sequence_shard_ranks
    h, f_d, a = ctx.hidden, ctx.dense_ffn, ctx.attn
    fp8 = ctx.elem_bytes < BF16_BYTES  # fp8, MXFP8, NVFP4: GEMM inputs saved quantised (NVFP4 counted as fp8's 1 B)
    ln_share = stage_share(ctx)  # the parallel block keeps one layernorm's input and output, one fp8 copy
    fp8_inputs = FP8_GEMM_INPUTS_SAVED_PER_H * ln_share if fp8 else 0.0
    rep = (ACT_REPLICATED_PER_H * ln_share + (DROPOUT_MASKS_PER_H if ctx.dropout else 0.0)
           - fp8_inputs) * h + BYTES_ACT * a.latent_elems
    ffn_per_f = FFN_ACT_PER_F[ctx.mats] - (FP8_FFN_OUT_INPUT_SAVED_PER_F if fp8 else 0.0) - fp8_ffn_cache_saved_per_f(ctx)
    active_experts = ctx.top_k + ctx.shared_experts
    f = shape.moe_layer_fraction
    # dispatched copies as the dispatch sends them (expert_parallel.dispatch_elem_bytes); an expert-TP group of
    # etp ranks holds etp / t of its attention-TP group's routed copies (Layouts.expert_fold; 1 without folding)
    routed_copies = f * (dispatch_elem_bytes(ctx) + BYTES_ACT) * ctx.top_k * h * lay.expert_fold
    shard = (BYTES_ACT * (a.q + a.o + a.k_v) + (FP8_OUTPUT_PROJ_COPY_PER_QD * a.o if fp8 else 0.0)
             + (1.0 - f) * (ffn_per_f * f_d) + f * (ffn_per_f * ctx.expert_ffn * active_experts))
    stored = rep / sp_div + shard / tp + routed_copies
    ln_out = (SELECTIVE_LN_OUTPUT_PER_H * ln_share - fp8_inputs) * h + BYTES_ACT * a.latent_norm_elems
    act_out = SELECTIVE_ACT_OUTPUT_PER_F - (FP8_FFN_OUT_INPUT_SAVED_PER_F if fp8 else 0.0)
    ffn_widths = (1.0 - f) * f_d + f * ctx.expert_ffn * active_experts
    saved = selective_saved_bytes(ctx.recompute_modules, ln_out / sp_div, act_out * ffn_widths / tp,
                                  ffn_per_f * ffn_widths / tp, BYTES_ACT * a.up_proj_out_elems / tp)
    scores = np.where(unfused_attention(ctx, lay.cp),
                      UNFUSED_SCORE_BYTES_KEPT * ctx.heads * ctx.seq / np.minimum(tp, ctx.heads), 0.0)
    scores_selective = 0.0 if RecomputeModule.CORE_ATTN in ctx.recompute_modules else scores
    share = full_recompute_share(ctx, lay)  # training.recompute_layers: the rest of a chunk keeps everything
    kept = np.where(rc >= RECOMPUTE_FULL, share * BYTES_ACT * h / sp_div + (1.0 - share) * (stored + scores),
                    stored + np.where(rc >= RECOMPUTE_SELECTIVE, scores_selective - saved, scores))
    return LayerActivations(stored_bytes=stored, selective_saved_bytes=saved, score_bytes=scores, kept_bytes=kept)


def fp8_ffn_cache_saved_per_f(ctx: Context) -> float:
    """Bytes per token per FFN-width element that the fp8 activation cache (training.activation_cache "fp8") saves:
    the k - 1 FFN-in outputs (GeLU input; SwiGLU gate and up) kept in fp8 with one fp32 scale per 1 x 128 tile
    instead of bf16, (k - 1)(2 - 1 - 4/128) B (DeepSeek-V3, arXiv 2412.19437 Sec. 3.3.3). 0 without it."""
    if not ctx.fp8_ffn_cache:
        return 0.0
    return (ctx.mats - 1.0) * (BF16_BYTES - FP8_BYTES - FP8_TILE_SCALE_BYTES)


def selective_saved_bytes(modules: frozenset[str], layernorm_out: Count, activation_out: Count,
                          ffn_internal: Count, mla_up_proj_out: Count) -> Count:
    """Bytes per token per layer that selective recomputation of ``modules`` drops (training.recompute_modules):
    the layernorm outputs (QKV and FFN-in GEMM inputs) for "layernorm"; the FFN activation output (the FFN-out GEMM
    input) for "activation"; every activation inside the FFN (its input, the checkpoint, stays) for "mlp", which
    includes the activation output; MLA's Q, K and V (the up-projections' outputs) for "mla_up_proj". The unfused
    attention scores ("core_attn") are dropped by the caller."""
    out = layernorm_out if RecomputeModule.LAYERNORM in modules else 0.0
    if RecomputeModule.MLA_UP_PROJ in modules:
        out = out + mla_up_proj_out
    if RecomputeModule.MLP in modules:
        return out + ffn_internal
    if RecomputeModule.ACTIVATION in modules:
        return out + activation_out
    return out + 0.0 * activation_out


def in_flight_layer_microbatches(ctx: Context, lay: Layouts, shape: LayoutShape) -> Count:
    """Layer-micro-batches of activations the first stage (rank 0) holds. 1F1B: p micro-batches of its layers.
    Interleaved (v chunks): Megatron's warm-up of 2(p-1) + (v-1)p chunk-forwards plus one, i.e. 2p-1 micro-batches
    of chunk 0 and p of every other chunk. When the layers do not split evenly the first virtual stage takes the
    short share (Megatron-Core --decoder-first-pipeline-num-layers): floor(L/(p v)) layers. With the embedding in
    the split (parallelism.embedding_loss_in_split; Llama 3 Sec. 3.3.2) it holds one layer fewer than a chunk,
    none at one layer per chunk."""
    pp, vpp = lay.pp, lay.vpp
    chunk = pipeline_chunk_layers(ctx, lay)
    chunk0 = np.where(np.mod(ctx.layers, pp * vpp) > 0, np.floor(ctx.layers / (pp * vpp)), chunk)
    chunk0 = np.maximum(chunk0, np.minimum(chunk, 1.0))
    if edges_in_split(ctx):
        chunk0 = np.where(pp > 1, chunk - 1.0, chunk0)
    layer_mbs = np.where(vpp > 1, chunk0 * (CHUNK0_PASSES_PER_STAGE * pp - 1.0) + chunk * (vpp - 1.0) * pp,
                         chunk0 * pp)
    return layer_mbs * np.minimum(pp, shape.microbatch_count) / pp


def last_rank_layer_microbatches(ctx: Context, lay: Layouts, shape: LayoutShape) -> Count:
    """Layer-micro-batches of activations the last pipeline rank holds (beside one micro-batch's logits). 1F1B: one
    micro-batch of its layers. Interleaved (v chunks): Megatron's warm-up of (v-1)p chunk-forwards plus one (its
    warm-up count (p - rank - 1) 2 + (v - 1) p at rank p - 1), i.e. p micro-batches of each chunk but the last and
    one of the last. With the output layer and loss in the split (parallelism.embedding_loss_in_split) the last
    chunk holds one layer fewer."""
    chunk = pipeline_chunk_layers(ctx, lay)
    last_chunk = chunk - edges_in_split(ctx) * (lay.pp > 1)
    earlier = chunk * (lay.vpp - 1.0) * np.minimum(lay.pp, shape.microbatch_count)
    return np.asarray(earlier + last_chunk, dtype=np.float64)


def stage_state_bytes(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles, params: GpuParams,
                      with_mtp: bool) -> Bytes:
    """Weights, gradients and Adam states of an edge stage as ZeRO shards them: the dense part over the ZeRO shard
    ranks, routed experts over the expert shard ranks; the last rank's with the multi-token-prediction modules."""
    total = params.total_params - (0.0 if with_mtp else params.mtp_params)
    experts = params.expert_params - (0.0 if with_mtp else params.mtp_expert_params)
    return (state_bytes(lay, prof, total - experts, shape.zero_shard_ranks, ctx.adam_state_bytes)
            + state_bytes(lay, prof, experts, shape.expert_shard_ranks, ctx.adam_state_bytes))


def memory_per_gpu(ctx: Context, lay: Layouts, shape: LayoutShape, prof: LayoutProfiles,
                   params: GpuParams) -> MemoryPerGpu:
    """Bytes per GPU on the busiest pipeline stage (the first, or the last with its logits)."""
    pp, m_tok = lay.pp, shape.microbatch_tokens
    act = layer_activations(ctx, lay, shape)
    states = stage_state_bytes(ctx, lay, shape, prof, params, with_mtp=True)  # the last rank's (the only with pp 1)
    first_states = (np.where(pp > 1, stage_state_bytes(ctx, lay, shape, prof, params, with_mtp=False), states)
                    if ctx.mtp_layers else states)
    buffers = zero3_buffer_bytes(lay, params.layer_params)
    # full recomputation also holds one layer's working set while it recomputes
    working = np.where(lay.recompute >= RECOMPUTE_FULL, m_tok * (act.stored_bytes + act.score_bytes), 0.0)
    in_flight = in_flight_layer_microbatches(ctx, lay, shape)
    logits = m_tok * ctx.vocab / lay.tp * LOGITS_BYTES_PER_ELEM
    mtp = mtp_activation_bytes(ctx, lay, shape, act.kept_bytes, logits)  # on the last rank
    act_mem = m_tok * act.kept_bytes * in_flight + working + np.where(pp > 1, 0.0, logits + mtp)
    first = first_states + buffers + act_mem
    last_in_flight = last_rank_layer_microbatches(ctx, lay, shape)
    last = np.where(pp > 1, states + buffers + m_tok * last_in_flight * act.kept_bytes + logits + mtp, 0.0)
    return MemoryPerGpu(states_bytes=states, zero3_buffer_bytes=buffers, in_flight_layer_microbatches=in_flight,
                        activation_bytes=act_mem, logits_bytes=logits, last_stage_bytes=last,
                        total_bytes=np.asarray(np.maximum(first, last), dtype=np.float64))
