"""Memory per GPU: model states by ZeRO stage and framework, activations of the first pipeline stage.

Equations and sources: docs/performance-model.md, section 6. Vectorised over layouts like model.evaluate,
which calls :func:`memory_per_gpu` with the parameter counts it already has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from engine.performance import hardware as hw
from engine.performance.hardware import GpuSpec

if TYPE_CHECKING:  # model imports this module; the types only are needed here
    from engine.performance.context import Context, Layouts

Arr = npt.NDArray[np.float64]
BYTES_ACT = 2.0  # bf16 activations

# Datasheet HBM sizes are binary: an "80 GB" H100 has 81,559 MiB (85.5e9 bytes, nvidia-smi), a "40 GB"
# A100 40,960 MiB, a "141 GB" H200 143,771 MiB. The catalog keeps the marketing figure; the bytes a job can
# use are that figure in GiB less what the driver reserves (81,559 of 81,920 MiB on H100: 0.9956).
HBM_BYTES_PER_CATALOG_GB = 2.0**30 / 1e9 * 0.9956


def usable_memory_bytes(gpu: GpuSpec) -> float:
    hbm = gpu.hbm_bytes * HBM_BYTES_PER_CATALOG_GB
    return hbm * (1.0 - hw.MEMORY_FRAGMENTATION) - hw.MEMORY_FIXED_GB * 1e9


def memory_per_gpu(ctx: Context, lay: Layouts, *, prof: dict[str, Arr], params_gpu: Arr, expert_gpu: Arr,
                   layer_p_gpu: Arr, frac_moe: float, n_micro: Arr, layers_stage: Arr) -> Arr:
    """Bytes per GPU on the busiest pipeline stage (first stage, or the last with its logits)."""
    tp, pp, dp, cp, ep, vpp = lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.vpp
    rc, zero = lay.recompute, lay.zero
    h, s, f_d, qd = ctx.hidden, ctx.seq, ctx.dense_ffn, ctx.q_dim
    kvd = ctx.kv_heads * ctx.head_dim
    sp_div = np.where(lay.sp > 0, tp, 1.0)
    m_tok = lay.mb * s / cp
    dpc = dp * cp
    edp = np.maximum(dpc / ep, 1.0)
    w_bytes = 2.0  # bf16 weights (fp8 casts are transient per layer); fp32 main grads; fp32 Adam states

    def _states(n_par: Arr, group: Arr) -> Arr:
        grads_sharded = (zero >= 3) | ((zero >= 2) & (prof["zero2_shards"] > 0.5))
        return n_par * (w_bytes / np.where(zero >= 3, group, 1.0) + 4.0 / np.where(grads_sharded, group, 1.0)
                        + 12.0 / np.where(zero >= 1, group, 1.0))

    states = _states(params_gpu - expert_gpu, dpc) + _states(expert_gpu, edp)
    zero3_buffers = np.where(zero >= 3, 3.0 * layer_p_gpu * 2.0, 0.0)
    # activations per token per layer (Korthikanti et al. 2022, generalised to GQA / gated FFN / MoE;
    # attention scores are never stored (fused FlashAttention-style kernel), so no 5as^2 term)
    # Replicated part (divided by t only with sequence parallelism): layernorm inputs 2 x 2h, the inputs of
    # the QKV and FFN-in GEMMs 2 x 2h, and with hidden dropout two 1-byte masks (2h): 10h (Korthikanti),
    # 8h without dropout. Sharded part: Q and the attention output 2 x 2qd, K and V 4gd, FFN as below.
    # fp8 (Transformer Engine): the GEMMs keep their fp8-cast inputs for the weight gradient instead of the
    # bf16 tensors - QKV and FFN-in inputs 1 B (-2h), FFN-out input 1 B (-f); the attention output stays
    # bf16 for the fused attention backward and the output projection keeps its own fp8 copy (+qd).
    fp8_act = ctx.elem_bytes == 1.0
    rep_act = (8.0 + (2.0 if ctx.dropout else 0.0) - (2.0 if fp8_act else 0.0)) * h
    ffn_act_dense = ((4.0 if ctx.mats == 2.0 else 6.0) - (1.0 if fp8_act else 0.0)) * f_d
    # MoE: the FFN part per active expert (sharded by expert tensor parallelism = TP), plus each dispatched
    # copy of the token (the experts' input, kept in the dispatch precision, 1 B with fp8 dispatch) and each
    # expert output kept for the combine's backward (bf16). Those two are full-width (h) on every TP rank:
    # Megatron-Core's dispatchers gather the routed tokens over the TP group before the column-parallel
    # expert GEMM (all-to-all dispatcher: gather of the permuted tokens; all-gather dispatcher: gather of the
    # hidden states over TP x EP, then the local experts' rows), and the row-parallel output is a full-width
    # partial sum until the reduce-scatter - so they are not divided by t.
    ffn_act_moe = (((4.0 if ctx.mats == 2.0 else 6.0) - (1.0 if fp8_act else 0.0)) * ctx.expert_ffn
                   * (ctx.top_k + ctx.shared_experts))
    routed_copies = frac_moe * (ctx.elem_bytes + BYTES_ACT) * ctx.top_k * h
    shard_act = (4.0 + (1.0 if fp8_act else 0.0)) * qd + 4.0 * kvd + (1.0 - frac_moe) * ffn_act_dense + frac_moe * ffn_act_moe
    act_layer_tok = rep_act / sp_div + shard_act / tp + routed_copies
    # selective recompute drops the tensors it regenerates, each term taken from the counts above: the
    # layernorm outputs = the QKV and FFN-in GEMM inputs (2 x 2h, fp8 2 x 1h; LN inputs stay for the
    # recompute and the LN backward), and the activation-function output = the FFN-out GEMM input
    # (2f, fp8 1f; the FFN-in output it is computed from stays), per active expert in MoE layers
    ln_out = (4.0 - (2.0 if fp8_act else 0.0)) * h
    act_out = 2.0 - (1.0 if fp8_act else 0.0)
    act_out_ffn = (1.0 - frac_moe) * act_out * f_d + frac_moe * act_out * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts)
    sel_saved_tok = ln_out / sp_div + act_out_ffn / tp
    # unfused attention also keeps softmax output (2 B), dropout mask (1 B) and dropout output (2 B) per
    # score: Korthikanti's 5as/t per token, unless the attention core is recomputed (selective / full)
    scores_tok = 5.0 * ctx.heads * s / np.minimum(tp, ctx.heads) * np.where(cp > 1, 0.0, float(ctx.unfused_attn))
    per_layer_full = np.where(rc >= 2, BYTES_ACT * h / sp_div,
                              act_layer_tok + np.where(rc >= 1, -sel_saved_tok, scores_tok))
    # First stage (rank 0), which holds the most in-flight micro-batches. 1F1B: pp micro-batches of its
    # layers. Interleaved (v chunks): Megatron's warm-up of 2(pp-1) + (v-1)pp chunk-forwards plus one, i.e.
    # 2pp-1 micro-batches of chunk 0 and pp of each other chunk (Korthikanti's factor 1 + (pp-1)/(pp v) when
    # the chunks are equal). When the layers do not split evenly the first virtual stage takes the short
    # share (Llama 3 paper Sec. 3.3.2: one layer fewer on the first and last stages; Megatron-Core
    # --decoder-first-pipeline-num-layers), so chunk 0 holds floor(L/(pp v)) layers.
    chunk = np.ceil(ctx.layers / (pp * vpp))
    chunk0 = np.where(np.mod(ctx.layers, pp * vpp) > 0, np.floor(ctx.layers / (pp * vpp)), chunk)
    chunk0 = np.maximum(chunk0, np.minimum(chunk, 1.0))
    layer_mbs = np.where(vpp > 1, chunk0 * (2.0 * pp - 1.0) + chunk * (vpp - 1.0) * pp, chunk0 * pp)
    act_stage_mb = m_tok * per_layer_full
    working = np.where(rc >= 2, m_tok * (act_layer_tok + scores_tok), 0.0)
    in_flight = layer_mbs * np.minimum(pp, n_micro) / pp
    logits_mem = m_tok * ctx.vocab / tp * 4.0 * 2.0
    act_mem = act_stage_mb * in_flight + working + np.where(pp > 1, 0.0, logits_mem)
    mem = states + zero3_buffers + act_mem
    # last stage also holds the logits
    last_stage = np.where(pp > 1, states + zero3_buffers + m_tok * layers_stage * per_layer_full + logits_mem, 0.0)
    mem = np.maximum(mem, last_stage)

    return np.asarray(mem, dtype=np.float64)
