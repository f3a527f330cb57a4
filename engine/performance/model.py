"""The training performance model, written once as vectorised numpy over arrays of layouts.

``evaluate(ctx, layouts)`` returns step time, FLOPs, memory and a breakdown for every layout at once;
``predict`` calls it with arrays of length 1 and the search with every candidate, so the two can never
disagree. Equations and the source of every constant: docs/performance-model.md.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from engine.performance import collectives as cl
from engine.performance import hardware as hw
from engine.performance.context import (  # noqa: F401  (re-exported: the model's public names)
    LAYOUT_FIELDS,
    Context,
    Layouts,
    make_context,
    nic_rate,
    profile_arrays,
)
from engine.performance.memory import memory_per_gpu, usable_memory_bytes
from engine.performance.moe_balance import busiest_rank_factor
from engine.performance.stragglers import straggler_time
from engine.performance.timeline import comm_timeline

Arr = npt.NDArray[np.float64]
ATTN_HALF_LEN = 440.0  # tokens: key-block length at which a fused attention kernel runs at half its long-block rate

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}

BYTES_ACT = 2.0  # bf16 activations and activation gradients





# ------------------------------------------------------------------------------------------ FLOP counts


def flops_per_token(ctx: Context) -> dict[str, float]:
    """Forward FLOPs per token (multiply-add = 2), non-causal attention convention (Megatron/PaLM MFU)."""
    h, kvd, qd = ctx.hidden, ctx.kv_heads * ctx.head_dim, ctx.q_dim
    attn_proj = 2.0 * h * (qd + 2.0 * kvd) + 2.0 * qd * h
    attn_core = 4.0 * ctx.seq * qd  # QK^T and AV
    dense_ffn = 2.0 * ctx.mats * h * ctx.dense_ffn
    if ctx.moe:
        moe_ffn = 2.0 * ctx.mats * h * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts) + 2.0 * h * ctx.experts
        n_moe = ctx.layers - ctx.dense_layers
    else:
        moe_ffn = 0.0
        n_moe = 0.0
    n_dense = ctx.layers - n_moe
    layers_fwd = ctx.layers * (attn_proj + attn_core) + n_dense * dense_ffn + n_moe * moe_ffn
    logits = 2.0 * h * ctx.vocab
    return {
        "layers": layers_fwd,
        "attn_core": ctx.layers * attn_core,
        "logits": logits,
        "forward": layers_fwd + logits,
    }


def unfused_mask(ctx: Context, cp: Arr) -> Arr:
    """1.0 where the layout materialises attention scores: the stack's default is unfused and there is no
    context parallelism (ring attention runs on fused kernels: Megatron-Core CP requires Transformer
    Engine's fused attention), else 0.0."""
    return np.where(cp > 1, 0.0, 1.0 if ctx.unfused_attn else 0.0)


def step_flops(ctx: Context, recompute: Arr, cp: Arr | None = None) -> tuple[float, Arr]:
    """(model FLOPs per step, hardware FLOPs per step per layout): 3x forward, + recomputation."""
    f = flops_per_token(ctx)
    tokens = ctx.global_batch * ctx.seq
    model = 3.0 * f["forward"] * tokens
    # selective recomputes no GEMM; only the unfused attention core (score GEMMs) adds FLOPs
    unf = unfused_mask(ctx, np.ones_like(recompute) if cp is None else cp)
    sel = f["attn_core"] * unf
    extra = np.where(recompute >= 2, f["layers"], np.where(recompute >= 1, sel, 0.0))
    return model, model + extra * tokens


def params_per_layer(ctx: Context) -> tuple[float, float, float]:
    """(attention params, dense-FFN params, MoE-FFN params: experts, shared+router) per layer."""
    h = ctx.hidden
    attn = 2.0 * h * ctx.q_dim + 2.0 * h * ctx.kv_heads * ctx.head_dim
    dense = ctx.mats * h * ctx.dense_ffn
    return attn, dense, ctx.mats * h * ctx.expert_ffn


# ----------------------------------------------------------------------------------------- kernel times


def _gemm_time(ctx: Context, m: Arr, k: Arr, n: Arr, count: Arr | float = 1.0, bf16: bool = False,
               kernel_eff: float = 1.0) -> Arr:
    """Time of ``count`` GEMMs (m x k) @ (k x n) per GPU: smooth roofline with a fixed per-kernel cost.

    efficiency = eff_max / sqrt(1 + (ridge / intensity)^2): near eff_max for large matrices, bandwidth
    bound for thin ones (small per-GPU matrices at high TP or small micro-batches). ``kernel_eff`` scales
    eff_max for kernels slower than the dense GEMMs (routed experts on warp-level grouped kernels).
    """
    precision = "bf16" if bf16 else ctx.precision
    b = 2.0 if bf16 else ctx.elem_bytes
    rate = ctx.gpu.peak(precision) * ctx.gpu.gemm_eff(precision) * kernel_eff
    flops = 2.0 * m * k * n
    bytes_ = b * (m * k + k * n) + 2.0 * m * n  # outputs stay bf16
    intensity = flops / bytes_
    ridge = rate / ctx.gpu.hbm_bw
    t = flops / rate * np.sqrt(1.0 + (ridge / intensity) ** 2)
    return count * (t + hw.KERNEL_OVERHEAD_S)


def _mem_time(ctx: Context, nbytes: Arr) -> Arr:
    return nbytes / (ctx.gpu.hbm_bw * hw.HBM_EFF)


# -------------------------------------------------------------------------------------------- evaluate


# -------------------------------------------------------------------------------------------- evaluate


def evaluate(ctx: Context, lay: Layouts) -> dict[str, Arr]:
    """Step time, FLOPs, memory and breakdown for every layout (all arrays of len(lay))."""
    tp, pp, dp, cp, ep, vpp = lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.vpp
    mb, rc, zero, sp = lay.mb, lay.recompute, lay.zero, lay.sp
    h, s, f_d = ctx.hidden, ctx.seq, ctx.dense_ffn
    kvd = ctx.kv_heads * ctx.head_dim
    gpu = ctx.gpu
    net = ctx.net
    prof = profile_arrays(ctx, lay)

    placements: dict[str, cl.Placement] = {}

    def coll(kind: str, nbytes: Arr, n: Arr, stride: Arr, group: str = "") -> Arr:
        pl = None
        if group:  # the same group's placement is computed once per evaluation
            pl = placements.get(group)
            if pl is None:
                pl = placements[group] = cl.place(net, n, stride)
        return cl.collective(net, kind, nbytes, n, stride, pl)

    m_tok = mb * s / cp  # tokens per micro-batch per GPU
    n_micro = ctx.global_batch / (dp * mb)
    sp_div = np.where(sp > 0, tp, 1.0)  # sequence parallelism shards the non-TP regions
    kv_local = kvd / np.minimum(tp, ctx.kv_heads)

    # ---- per-layer compute (forward), one micro-batch, one GPU
    ones = np.ones_like(tp)
    qd = ctx.q_dim
    t_attn_gemm = (_gemm_time(ctx, m_tok, h * ones, (qd / tp + 2.0 * kv_local))
                   + _gemm_time(ctx, m_tok, qd / tp, h * ones))
    unf = unfused_mask(ctx, cp)
    if ctx.unfused_attn:
        # scores materialised (Megatron-LM 2021-22): batched QK^T and AV GEMMs over all s x s positions
        # (no causal skipping) plus HBM passes over the b*a/t*s*s score tensor: forward softmax read+write
        # (4 B) and dropout read+write+1-byte mask (5 B); backward dropout (5 B) and softmax (6 B) gradients
        heads_local = ctx.heads / np.minimum(tp, ctx.heads)
        q_len = s / cp
        cnt = mb * heads_local
        t_sc = (_gemm_time(ctx, q_len, ctx.head_dim * ones, s * ones, cnt, bf16=True)
                + _gemm_time(ctx, q_len, s * ones, ctx.head_dim * ones, cnt, bf16=True))
        score_elems = cnt * q_len * s
        u_fwd = t_sc + _mem_time(ctx, hw.UNFUSED_SCORE_BYTES_FWD * score_elems) + 2.0 * hw.KERNEL_OVERHEAD_S
        u_bwd = (2.0 * t_sc + _mem_time(ctx, hw.UNFUSED_SCORE_BYTES_BWD * score_elems)
                 + 2.0 * hw.KERNEL_OVERHEAD_S)
    else:
        u_fwd = u_bwd = np.zeros_like(tp)
    # fused path (always computed: layouts with context parallelism use it)
    # fused FlashAttention-style kernel: causal half of the counted FLOPs at the family's measured
    # FlashAttention-2 rate (bf16 also in fp8 training); backward 2.5x forward (recomputes P)
    attn_flops = 4.0 * m_tok * s * qd / tp
    # with context parallelism each ring step runs the kernel on a key block of s/c tokens: fused
    # attention kernels lose throughput on short blocks (FlashAttention-2 Fig. 4, FlashAttention-3
    # Fig. 5: about 0.85 of the 2K-token rate at 1K tokens, 0.65 at 512), modelled as L/(L + 440)
    # relative to L = 2,048 (the rate attn_eff was measured at), not below 0.5 (shorter blocks than the
    # figures show), and one kernel pair per ring step
    blk = s / cp
    len_eff = np.clip((blk / (blk + ATTN_HALF_LEN)) / (2048.0 / (2048.0 + ATTN_HALF_LEN)), 0.5, 1.0)
    attn_rate = gpu.peak_bf16_flops * gpu.attn_eff * len_eff
    f_fwd = hw.ATTN_CAUSAL_WORK * attn_flops / attn_rate + 2.0 * cp * hw.KERNEL_OVERHEAD_S
    t_attn_core = np.where(unf > 0.5, u_fwd, f_fwd)
    t_attn_core_bwd = np.where(unf > 0.5, u_bwd, 2.5 * f_fwd)

    def ffn_time(ffn: float, tokens: Arr, count: Arr | float = 1.0, keff: float = 1.0) -> Arr:
        return _gemm_time(ctx, tokens, h * ones, (ctx.mats - 1.0) * ffn / tp, count, kernel_eff=keff) + _gemm_time(
            ctx, tokens, ffn / tp, h * ones, count, kernel_eff=keff
        )

    t_dense_ffn = ffn_time(f_d, m_tok)
    # elementwise traffic per token, forward: 2 layernorms (read+write h), 2 dropout+residual adds
    # (read 2h, write h, mask h), FFN activation (gelu: read+write f; swiglu: read 2f, write f)
    rep_elems = 12.0 * h / sp_div
    act_elems_dense = (ctx.mats) * f_d / tp
    t_ew_dense = _mem_time(ctx, m_tok * BYTES_ACT * (rep_elems + act_elems_dense)) + 6.0 * hw.KERNEL_OVERHEAD_S

    if ctx.moe:
        n_moe = ctx.layers - ctx.dense_layers
        # dropless routing: the busiest EP rank's load sets the pace (moe_balance.py: balls into bins +
        # routing-preference spread, expected maximum over the ep ranks)
        imb = busiest_rank_factor(ctx.experts, ep, m_tok * ctx.top_k)
        tok_expert = m_tok * ep * ctx.top_k / ctx.experts * imb  # tokens per local expert, busiest rank
        # routed experts run on the grouped-GEMM kernel class of the stack (hardware.expert_kernel_factor)
        t_moe_ffn = ffn_time(ctx.expert_ffn, tok_expert, ctx.experts / ep, ctx.expert_gemm_eff)
        if ctx.shared_experts > 0:
            t_shared = ffn_time(ctx.expert_ffn * ctx.shared_experts, m_tok)
            t_moe_ffn = t_moe_ffn + t_shared
        else:
            t_shared = np.zeros_like(tp)
        t_moe_ffn = t_moe_ffn + _gemm_time(ctx, m_tok, h * ones, ctx.experts * ones)  # router
        act_moe = ctx.mats * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts) / tp
        act_moe_busy = ctx.mats * ctx.expert_ffn * (ctx.top_k * imb + ctx.shared_experts) / tp
        perm_elems = 2.0 * ctx.top_k * imb * h / sp_div
        if ctx.allgather_dispatch:  # + the gathered [S*B*EP, H] buffer: zero-filled, scattered into, reduced
            perm_elems = perm_elems + 2.0 * ep * h
        t_ew_moe = _mem_time(ctx, m_tok * BYTES_ACT * (rep_elems + act_moe_busy + perm_elems))
    else:
        n_moe = 0.0
        t_moe_ffn = np.zeros_like(tp)
        t_shared = np.zeros_like(tp)
        t_ew_moe = np.zeros_like(tp)
        act_moe = np.zeros_like(tp)
    frac_moe = n_moe / ctx.layers

    t_gemm_fwd = t_attn_gemm + (1.0 - frac_moe) * t_dense_ffn + frac_moe * t_moe_ffn
    t_ew_fwd = (1.0 - frac_moe) * t_ew_dense + frac_moe * t_ew_moe
    # backward: 2x GEMM FLOPs (dgrad + wgrad), attention backward 2.5x forward (FlashAttention-2), 2x traffic
    # fp8 (Transformer Engine recipe): every GEMM operand is cast to fp8 together with its transpose
    # (fused cast-transpose: read 2 B, write 2 x 1 B per element). Forward: the inputs of the output
    # projection and of FFN-out (QKV and FFN-in casts are fused into the preceding layernorm). Backward:
    # the output gradient of every GEMM (QKV, output projection, FFN-in, FFN-out).
    if ctx.elem_bytes < 2.0:
        f_eff = (1.0 - frac_moe) * f_d + frac_moe * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts)
        cast_fwd = hw.FP8_CAST_BYTES * (qd / tp + f_eff / tp)
        cast_bwd = hw.FP8_CAST_BYTES * ((qd + 2.0 * kvd) / tp + 2.0 * h / sp_div + (ctx.mats - 1.0) * f_eff / tp)
        t_cast_fwd = _mem_time(ctx, m_tok * cast_fwd) + 2.0 * hw.KERNEL_OVERHEAD_S
        t_cast_bwd = _mem_time(ctx, m_tok * cast_bwd) + 4.0 * hw.KERNEL_OVERHEAD_S
    else:
        t_cast_fwd = t_cast_bwd = np.zeros_like(tp)
    t_layer_fwd = t_gemm_fwd + t_attn_core + t_ew_fwd + t_cast_fwd
    t_layer_bwd = 2.0 * t_gemm_fwd + t_attn_core_bwd + 2.0 * t_ew_fwd + t_cast_bwd
    # selective = recompute everything except the GEMMs (Korthikanti et al. 2022; Megatron-Core
    # --recompute-modules layernorm moe_act core_attn): the two layernorm outputs (read +
    # write h each, 4h elements, the LN part of rep_elems) and the FFN activation output (the activation's
    # own traffic, act_elems), memory bound at HBM speed, 3 kernels; plus the attention core when it is
    # unfused (a fused flash kernel stores nothing to recompute: its backward already recomputes P)
    act_rc = (1.0 - frac_moe) * act_elems_dense + frac_moe * act_moe
    t_sel_ew = _mem_time(ctx, m_tok * BYTES_ACT * (4.0 * h / sp_div + act_rc)) + 3.0 * hw.KERNEL_OVERHEAD_S
    t_sel = t_sel_ew + t_attn_core * unf
    t_layer_rc = np.where(rc >= 2, t_layer_fwd, np.where(rc >= 1, t_sel, 0.0))

    # ---- TP communication per layer per micro-batch: 2 all-reduces (or AG+RS pairs with SP) fwd, 2 bwd,
    # 2 more when the forward is recomputed (full recompute)
    act_bytes = m_tok * h * BYTES_ACT
    # MoE layers with TP: experts are tensor-parallel over the same ranks (Megatron-Core's expert tensor
    # parallelism defaults to the TP size), so the FFN-side all-gather / reduce-scatter carries every routed
    # copy of the token (top_k) plus the shared experts' input, instead of one copy. Those two collectives
    # are the token dispatcher's own NCCL calls (gather / reduce-scatter of the permuted tokens over the TP
    # group), not Transformer Engine linear layers, so TP-overlap (userbuffers, which chunks a TE GEMM
    # against its neighbour collective) does not hide them: they are exposed under every profile.
    # All-gather dispatcher (training.moe_dispatcher "allgather", Megatron-Core MoEAllGatherTokenDispatcher):
    # every rank all-gathers the hidden states of its whole TP x EP group ([S*B*EP, H], one copy per token,
    # sequence-parallel shards in), keeps the rows routed to its local experts, and reduce-scatters the
    # scattered-back outputs ([S*B*EP, H]) in the combine; backward mirrors both. One AG + RS pair (the cost
    # of an all-reduce of that buffer) per direction, over tp x ep contiguous ranks (EP ranks are adjacent
    # data-parallel ranks), so with EP > 1 it crosses the NICs; never overlapped (Megatron-Core's EP overlap
    # needs the all-to-all dispatcher). Counted with TP traffic when EP = 1, as expert traffic otherwise.
    # The shared experts are ordinary sequence-parallel TP layers there (their own AG / RS).
    t_ar_attn = coll("ar", act_bytes, tp, ones, "tp")
    shared_tp = np.zeros_like(tp)
    t_disp_ag = np.zeros_like(tp)
    if ctx.moe and ctx.allgather_dispatch:
        t_disp_ag = coll("ar", act_bytes * ep, tp * ep, ones, "tpep")
        t_ar_moe = np.where(ep > 1, 0.0, t_disp_ag)
        if ctx.shared_experts > 0:
            shared_tp = t_ar_attn
    elif ctx.moe:
        t_ar_moe = coll("ar", act_bytes * (ctx.top_k + min(ctx.shared_experts, 1.0)), tp, ones, "tp")
    else:
        t_ar_moe = t_ar_attn
    n_tp = 4.0 + np.where(rc >= 2, 2.0, 0.0)  # half on the attention side, half on the FFN side
    t_tp_hideable = 0.5 * n_tp * (t_ar_attn + (1.0 - frac_moe) * t_ar_attn + frac_moe * shared_tp)
    t_tp_layer = t_tp_hideable * (1.0 - prof["tp_overlap"]) + 0.5 * n_tp * frac_moe * t_ar_moe

    # ---- CP: all-gather K,V forward, all-gather + reduce-scatter of dK,dV backward (ring attention),
    # overlapped with the attention core it feeds
    kv_bytes = mb * s * 2.0 * kv_local * BYTES_ACT
    t_cp_raw = 3.0 * coll("ag", kv_bytes, cp, tp, "cp")
    t_cp_layer = np.maximum(0.0, t_cp_raw - (t_attn_core + t_attn_core_bwd))
    t_cp_layer = np.where(cp > 1, np.maximum(t_cp_layer, 0.1 * t_cp_raw), 0.0)

    # ---- EP: dispatch + combine all-to-all forward and backward (+ forward again with full recompute).
    # Dispatch-direction transfers (forward dispatch of the expert inputs, backward dispatch of the
    # gradients at the expert outputs) feed expert GEMMs and are sent in the GEMM precision (fp8: 1 B,
    # quantised before sending as the GEMM would cast them anyway; DeepSeek-V3 Sec. 3.3, DeepEP,
    # Transformer Engine); combine-direction transfers are weighted sums over top_k and stay bf16.
    t_layer_compute = t_layer_fwd + t_layer_bwd + t_layer_rc
    if ctx.moe and ctx.allgather_dispatch:
        placements["ep"] = placements["tpep"]
        t_ep_layer = np.where(ep > 1, frac_moe * 0.5 * n_tp * t_disp_ag, 0.0)
        t_ep_hidden = np.zeros_like(tp)
    elif ctx.moe:
        tok_a2a = m_tok / sp_div
        placements["ep"] = cl.place(net, ep, tp)
        # the busiest rank receives (dispatch) and returns (combine) imb times the mean share
        t_disp = cl.moe_a2a(net, tok_a2a * imb, h * ctx.elem_bytes, ctx.top_k, ep, tp, placements["ep"])
        t_comb = cl.moe_a2a(net, tok_a2a * imb, h * BYTES_ACT, ctx.top_k, ep, tp, placements["ep"])
        n_pairs = 2.0 + np.where(rc >= 2, 1.0, 0.0)
        t_ep_raw = frac_moe * n_pairs * (t_disp + t_comb)
        # Overlap. In the steady state of a pipelined schedule (1F1B, interleaved, DualPipe) a stage
        # alternates the forward of one micro-batch with the backward of another: the two are
        # independent, so the all-to-all of one runs under the compute of the other (DeepSeek-V3
        # DualPipe, Megatron-Core's EP-communication overlap). Exposed = what exceeds that compute.
        # Warm-up and cool-down slots, (p-1) of the m micro-batches, have no partner; there, and
        # without pipelining, only the shared experts (independent of the routed tokens) run under the
        # dispatch (DeepSeek-V2 Sec. 3.1.3, Megatron-Core shared-expert overlap).
        steady = np.where((pp > 1) & (n_micro >= 2.0),
                          np.clip((n_micro - (pp - 1.0)) / n_micro, 0.0, 1.0), 0.0)
        shared_window = frac_moe * 3.0 * t_shared  # forward + backward (2x) of the shared experts
        exposed_ss = np.maximum(0.0, t_ep_raw - t_layer_compute)
        exposed_other = np.maximum(0.0, t_ep_raw - shared_window)
        # a stack without EP overlap (Megatron-Core's default) exposes the whole all-to-all
        t_ep_layer = np.where(prof["ep_overlap"] > 0.5, steady * exposed_ss + (1.0 - steady) * exposed_other,
                              t_ep_raw)
        t_ep_hidden = t_ep_raw - t_ep_layer
    else:
        t_ep_layer = np.zeros_like(tp)
        t_ep_hidden = np.zeros_like(tp)

    # ---- bottleneck pipeline stage: ceil(L/pp) layers, or the even share of layers + logits when the
    # framework balances the output layer by giving the last stage fewer layers (Llama 3 did so)
    layers_stage = np.ceil(ctx.layers / (pp * vpp)) * vpp
    t_logit_gemm = _gemm_time(ctx, m_tok, h * ones, ctx.vocab / tp)
    t_ce = _mem_time(ctx, m_tok * ctx.vocab / tp * 4.0 * 4.0)  # fp32 logits: softmax, loss, grad passes
    t_logits = 3.0 * t_logit_gemm + t_ce
    t_layer_total = t_layer_compute
    comm_layer = t_tp_layer + t_cp_layer + t_ep_layer
    t_layer_all = t_layer_total + comm_layer
    stage_time = np.maximum(layers_stage * t_layer_all, (ctx.layers * t_layer_all + t_logits) / pp)
    stage_share = stage_time / np.maximum(ctx.layers * t_layer_all + t_logits, 1e-30)  # of the whole model
    t_compute_mb = stage_share * (ctx.layers * t_layer_total + t_logits)
    t_tp_mb = stage_share * ctx.layers * t_tp_layer
    t_cp_mb = stage_share * ctx.layers * t_cp_layer
    t_ep_mb = stage_share * ctx.layers * t_ep_layer

    # ---- PP point-to-point: activation forward, gradient backward, per virtual stage
    # Megatron scatter/gather: each TP rank sends 1/tp of the activation, then all-gathers over NVLink
    p2p_bytes = m_tok * h * BYTES_ACT / tp
    t_pp_mb = np.where(pp > 1, 2.0 * vpp * cl.p2p(net, p2p_bytes, tp * cp * dp), 0.0)

    # ---- parameters and DP / ZeRO
    attn_p, dense_p, expert_p = params_per_layer(ctx)
    moe_p_gpu = (ctx.experts / ep + ctx.shared_experts) * expert_p / tp + h * ctx.experts
    layer_p_gpu = attn_p / tp + (1.0 - frac_moe) * dense_p / tp + frac_moe * moe_p_gpu
    emb_p_gpu = ctx.vocab * h / tp * np.where(pp > 1, 1.0, 2.0)
    params_gpu = layers_stage * layer_p_gpu + emb_p_gpu
    dpc = dp * cp  # gradients are reduced over data x context parallel ranks
    # routed-expert weights are replicated only over the expert-data-parallel group (d*c/e ranks), so
    # ZeRO can shard their states e times less (Megatron-Core distributed optimizer, DeepSpeed-MoE)
    expert_gpu = layers_stage * frac_moe * (ctx.experts / ep) * expert_p / tp
    edp = np.maximum(dpc / ep, 1.0)
    grad_bytes = np.where(zero >= 3, 2.0, 4.0)  # fp32 grad reduction (Megatron); bf16 in FSDP
    per_mb_rs = (zero >= 2) & (prof["zero2_per_mb"] > 0.5) & (zero < 3) & (dpc > 1)
    t_grad = np.where(zero >= 1, coll("rs", params_gpu * grad_bytes, dpc, tp, "dp"),
                      coll("ar", params_gpu * grad_bytes, dpc, tp, "dp"))
    t_pgather = np.where(zero >= 1, coll("ag", params_gpu * 2.0, dpc, tp, "dp"), 0.0)
    bucket = np.minimum(1.0, prof["bucket"] / np.maximum(params_gpu, 1.0))
    t_fwd_mb = stage_share * ctx.layers * (t_layer_fwd + 0.5 * comm_layer)
    t_bwd_mb = stage_share * ctx.layers * (t_layer_bwd + t_layer_rc + 0.5 * comm_layer)
    # step-end DP traffic (ZeRO 0-2 reducing once per step): overlapped with the last backward / first
    # forward when the framework does so, the last bucket always exposed
    grad_step = np.where(per_mb_rs, 0.0, t_grad)
    # With v > 1 model chunks the reduction of chunk c runs while the stage still computes the cool-down
    # backwards of the chunks below it, (v-1)/v of min(pp, m) micro-batch slots, and the gather of chunk c+1
    # runs under the warm-up forwards of chunk c (Megatron-LM docs/distrib_optimizer.md, overlap with
    # interleaved schedules); the last bucket stays exposed.
    chunk_slots = np.where(vpp > 1, (vpp - 1.0) / vpp * np.minimum(pp, n_micro), 0.0)
    win_grad = t_bwd_mb * (1.0 + chunk_slots)
    win_pg = t_fwd_mb * (1.0 + chunk_slots)
    exposed_grad = np.where(prof["grad_overlap"] > 0.5, np.maximum(grad_step - win_grad, bucket * grad_step), grad_step)
    exposed_pg = np.where(prof["param_overlap"] > 0.5, np.maximum(t_pgather - win_pg, bucket * t_pgather), t_pgather)
    dp_exposed = np.where(dpc > 1, np.where(zero >= 3, 0.0, exposed_grad + exposed_pg), 0.0)

    # ---- per-micro-batch data-parallel traffic and the shared-resource timeline
    # ZeRO-2 as DeepSpeed/FSDP run it: gradients reduce-scattered at every micro-batch's backward.
    # ZeRO-3 / FSDP: each layer's parameters all-gathered for forward and for backward and its gradients
    # reduce-scattered, per micro-batch; message = one layer's parameters per rank, so at thousands of ranks
    # the per-collective latency (ring (n-1) steps, PAT log2 n) matters as much as the bandwidth.
    z2_mb = np.where(per_mb_rs, t_grad, 0.0)
    layer_bytes = layer_p_gpu * 2.0
    z3_layer = 2.0 * coll("ag", layer_bytes, dpc, tp, "dp") + coll("rs", layer_bytes, dpc, tp, "dp")
    z3_mb = np.where((zero >= 3) & (dpc > 1),
                     layers_stage * z3_layer + 3.0 * coll("ag", emb_p_gpu * 2.0, dpc, tp, "dp"), 0.0)
    on_nic_dp = cl.on_nic(placements["dp"])
    on_nic_cp = cl.on_nic(placements["cp"])
    on_nic_ep = cl.on_nic(placements.get("ep") or cl.place(net, ep, tp))
    zeros = np.zeros_like(tp)
    # interleaved schedules overlap their send/recv with the other chunks' compute (Megatron-LM
    # --overlap-p2p-communication, on by default with virtual stages); one transfer per micro-batch stays
    pp_hideable = np.where((prof["pp_overlap"] > 0.5) & (vpp > 1), t_pp_mb, 0.0)
    pp_floor = pp_hideable / np.maximum(2.0 * vpp, 1.0)
    on_nic_pp = (tp * cp * dp >= net.domain).astype(np.float64)
    t_bwd_c = stage_share * ctx.layers * (t_layer_bwd + t_layer_rc)
    z2_floor = np.where(prof["grad_overlap"] > 0.5, bucket, 1.0) * z2_mb  # last bucket, or all without overlap
    z3_floor = np.where(zero >= 3, z3_layer / np.maximum(prof["z3_prefetch"], 1.0), 0.0)  # first layer's gather
    tl = comm_timeline(
        compute=t_compute_mb,
        items={
            "cp": (stage_share * ctx.layers * np.where(cp > 1, t_cp_raw, 0.0), t_cp_mb, on_nic_cp,
                   stage_share * ctx.layers * np.where(cp > 1, 0.1 * t_cp_raw, 0.0)),
            "ep": (stage_share * ctx.layers * (t_ep_layer + t_ep_hidden), t_ep_mb, on_nic_ep, zeros),
            "z2": (z2_mb, np.maximum(z2_mb - np.where(prof["grad_overlap"] > 0.5, t_bwd_c, 0.0), z2_floor), on_nic_dp,
                   z2_floor),
            "z3": (z3_mb, np.maximum(0.0, z3_mb - t_compute_mb) + z3_floor, on_nic_dp, z3_floor),
            "pp": (pp_hideable, np.maximum(pp_hideable - t_compute_mb, pp_floor), on_nic_pp, pp_floor),
        },
    )
    t_cp_mb = tl["cp"]
    t_ep_mb = tl["ep"]
    t_pp_mb = t_pp_mb - pp_hideable + tl["pp"]
    dp_mb_exposed = tl["z2"] + tl["z3"]

    # ---- optimizer (memory bound), sharded by ZeRO >= 1
    opt_params = ((params_gpu - expert_gpu) / np.where(zero >= 1, dpc, 1.0)
                  + expert_gpu / np.where(zero >= 1, edp, 1.0))
    t_opt = _mem_time(ctx, opt_params * hw.OPTIMIZER_BYTES_PER_PARAM)

    # ---- interference: collectives hidden behind compute still take SMs and HBM bandwidth from it
    tp_hidden_mb = stage_share * ctx.layers * t_tp_hideable * prof["tp_overlap"]
    interf_mb = hw.OVERLAP_INTERFERENCE * (tp_hidden_mb + tl["hidden"])
    dp_hidden = np.where((dpc > 1) & (zero < 3), (grad_step - exposed_grad) + (t_pgather - exposed_pg), 0.0)
    interf_dp = hw.OVERLAP_INTERFERENCE * np.maximum(dp_hidden, 0.0)

    # ---- pipeline schedule: 1F1B / interleaved 1F1B, bubble (pp-1)/vpp micro-batch slots
    t_mb = t_compute_mb + interf_mb + t_tp_mb + t_cp_mb + t_ep_mb + t_pp_mb + dp_mb_exposed
    bubble = (pp - 1.0) / vpp * t_mb
    # stragglers: every synchronous step waits for the slowest of its ranks (order statistics)
    t_strag = straggler_time(n_micro * t_compute_mb, ctx.gpus)
    step = n_micro * t_mb + bubble + dp_exposed + interf_dp + t_opt + t_strag

    # ---- memory per GPU (bottleneck = first stage, which holds the most in-flight micro-batches)
    mem = memory_per_gpu(ctx, lay, prof=prof, params_gpu=params_gpu, expert_gpu=expert_gpu, layer_p_gpu=layer_p_gpu,
                         frac_moe=frac_moe, n_micro=n_micro, layers_stage=layers_stage)
    usable = usable_memory_bytes(gpu)

    model_flops, hw_flops = step_flops(ctx, rc, cp)
    tokens_step = ctx.global_batch * ctx.seq
    net_t = n_micro * (t_tp_mb + t_cp_mb + t_ep_mb + t_pp_mb + dp_mb_exposed) + dp_exposed + interf_dp
    return {
        "step_time_s": step,
        "tokens_per_s": tokens_step / step,
        "model_flops": model_flops * ones,
        "hardware_flops": hw_flops,
        "memory_bytes": mem,
        "fits": (mem <= usable).astype(np.float64),
        "network_wait_fraction": net_t / step,
        "compute": n_micro * (t_compute_mb + interf_mb),
        "tp_comm": n_micro * t_tp_mb,
        "cp_comm": n_micro * t_cp_mb,
        "ep_comm": n_micro * t_ep_mb,
        "pp_comm": n_micro * t_pp_mb,
        "pp_bubble": bubble,
        "dp_comm_exposed": dp_exposed + interf_dp + n_micro * dp_mb_exposed,
        "optimizer": t_opt,
        "stragglers": t_strag,
    }


BREAKDOWN_KEYS = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "pp_bubble", "dp_comm_exposed", "optimizer",
                  "stragglers")


def divisors(n: int) -> list[int]:
    out = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(out + [n // d for d in out]))
