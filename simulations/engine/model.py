"""The training performance model, written once as vectorised numpy over arrays of layouts.

``evaluate(ctx, layouts)`` returns step time, FLOPs, memory and a breakdown for every layout at once;
``predict`` calls it with arrays of length 1 and the search with every candidate, so the two can never
disagree. Equations and the source of every constant: docs/performance-model.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from simulations.engine import collectives as cl
from simulations.engine import hardware as hw
from simulations.engine.frameworks import PROFILES, profile
from simulations.engine.hardware import GpuSpec
from simulations.engine.routing import DCQCN_HEADROOM_EFF, DEFAULT_QPS, ROCE_FRAMING_EFF
from simulations.engine.scenario import Scenario
from simulations.engine.stragglers import straggler_time
from simulations.engine.timeline import comm_timeline

Arr = npt.NDArray[np.float64]

RECOMPUTE_CODES = {"none": 0, "selective": 1, "full": 2}
RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}

BYTES_ACT = 2.0  # bf16 activations and activation gradients


@dataclass(frozen=True)
class Context:
    """Scalars of one scenario (model, batch, GPU, fabric) shared by every layout."""

    layers: int
    hidden: float
    heads: float
    kv_heads: float
    head_dim: float
    q_dim: float  # heads x head_dim (= hidden unless model.head_dim is set)
    unfused_attn: bool  # attention scores materialised in HBM (see hardware.FAMILY_ATTENTION)
    dropout: bool  # hidden dropout masks stored (training.dropout; auto = off for gated-FFN models)
    ffn: float
    mats: float  # FFN weight matrices: 3 gated (SwiGLU), 2 otherwise
    vocab: float
    seq: float
    moe: bool
    experts: float
    top_k: float
    expert_ffn: float
    shared_experts: float
    dense_layers: float
    dense_ffn: float
    global_batch: float
    precision: str
    tokens: float
    gpus: float
    gpn: float
    gpu: GpuSpec
    # fabric, per GPU
    nic_bw_gpu: float  # bytes/s of NIC line rate per GPU x protocol efficiency
    routing: str
    qps: float  # queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION); 0 = the routing mode's default
    domain: float  # GPUs per NVLink domain (8 HGX, 72 NVL72)
    leaf_nodes: float  # nodes whose same-rail NICs share a leaf
    pod_nodes: float  # nodes under one non-blocking pod (3-tier spine group)
    oversub_leaf: float
    oversub_spine: float
    tiers: float
    fabric: str
    framework: str | None = None  # None = auto (per layout, frameworks.auto_choice)
    sharp: bool = False  # in-network reduction (CollNet/SHARP) enabled
    # calibration hooks (simulations.engine.calibration): multiplier on inter-node bandwidth per collective
    # kind ("ar", "ag", "rs", "a2a", "p2p") and a per-step network latency replacing the modelled one
    net_bw_scale: Mapping[str, float] = field(default_factory=dict)
    net_alpha_s: float | None = None

    @property
    def peak(self) -> float:
        return self.gpu.peak(self.precision)

    @property
    def elem_bytes(self) -> float:
        return 1.0 if self.precision == "fp8" and self.gpu.peak_fp8_flops is not None else 2.0

    @property
    def net(self) -> cl.Net:
        g = self.gpu
        scale = {f"bw_scale_{k}": float(v) for k, v in self.net_bw_scale.items()}
        return cl.Net(
            domain=self.domain, job_nodes=max(self.gpus / self.domain, 1.0), leaf_nodes=self.leaf_nodes,
            pod_nodes=self.pod_nodes, oversub_leaf=self.oversub_leaf, oversub_spine=self.oversub_spine,
            tiers=self.tiers, fabric=self.fabric, routing=self.routing,
            qps=self.qps or DEFAULT_QPS.get(self.routing, 1.0), nic_bw_gpu=nic_rate(self),
            nvl_ring=g.nvlink_uni_bw * g.nvlink_ring_eff, nvl_ar=g.nvlink_uni_bw * g.nvlink_ar_eff,
            nvls=g.nvlink_ar_eff > g.nvlink_ring_eff, sharp=self.sharp, alpha_override=self.net_alpha_s, **scale,
        )


def make_context(s: Scenario, gpu: GpuSpec) -> Context:
    m, c, t = s.model, s.cluster, s.training
    moe = m.moe
    nic_bw = c.nic_gbps * 1e9 / 8.0 * c.nics_per_node / c.gpus_per_node * hw.PROTOCOL_EFF["infiniband"]
    net = _fabric_numbers(s)
    return Context(
        layers=m.layers,
        hidden=float(m.hidden),
        heads=float(m.heads),
        kv_heads=float(m.kv_heads),
        head_dim=float(m.dim_head),
        q_dim=float(m.heads * m.dim_head),
        unfused_attn=(t.attention or gpu.default_attention) == "unfused",
        dropout=(not m.gated_ffn) if t.dropout is None else t.dropout,
        ffn=float(m.ffn_hidden),
        mats=3.0 if m.gated_ffn else 2.0,
        vocab=float(m.vocab),
        seq=float(m.seq_len),
        moe=moe is not None,
        experts=float(moe.experts) if moe else 1.0,
        top_k=float(moe.top_k) if moe else 1.0,
        expert_ffn=float(moe.expert_ffn_hidden) if moe else 0.0,
        shared_experts=float(moe.shared_experts) if moe else 0.0,
        dense_layers=float(moe.dense_layers) if moe else float(m.layers),
        dense_ffn=float(moe.dense_ffn_hidden) if moe else float(m.ffn_hidden),
        global_batch=float(t.global_batch),
        precision=t.precision,
        tokens=t.tokens,
        gpus=float(c.gpus),
        gpn=float(min(c.gpus_per_node, c.gpus)),
        gpu=gpu,
        nic_bw_gpu=nic_bw,
        routing=c.routing,
        qps=float(getattr(c, "qps_per_connection", 0) or 0.0),
        tiers=float(c.tiers),
        fabric=c.fabric,
        framework=getattr(t, "framework", None),
        sharp=bool(getattr(c, "sharp", False)),
        domain=net["domain"],
        leaf_nodes=net["leaf_nodes"],
        pod_nodes=net["pod_nodes"],
        oversub_leaf=net["oversub_leaf"],
        oversub_spine=net["oversub_spine"],
    )


def nic_rate(ctx: Context) -> float:
    """Bytes/s per GPU the transport delivers: ``ctx.nic_bw_gpu`` (line rate x InfiniBand's efficiency) less
    RoCE's extra framing, and less DCQCN's rate headroom unless the Ethernet fabric routes adaptively
    (Spectrum-X-class fabrics pair adaptive routing with their own telemetry-based congestion control)."""
    if ctx.fabric != "roce":
        return ctx.nic_bw_gpu
    return ctx.nic_bw_gpu * ROCE_FRAMING_EFF * (1.0 if ctx.routing == "adaptive" else DCQCN_HEADROOM_EFF)


def _fabric_numbers(s: Scenario) -> dict[str, float]:
    """NVLink domain, leaf and pod sizes and per-tier oversubscription from the scenario's topology."""
    c = s.cluster
    gpn = float(min(c.gpus_per_node, c.gpus))
    topo = getattr(s, "topology", None)
    if topo is not None:
        dom = float(getattr(topo, "nvlink_domain_gpus", gpn) or gpn)
        over = dict(getattr(topo, "oversubscription", {}) or {})
        return {
            "domain": dom,
            "leaf_nodes": max(float(topo.nodes_per_leaf) * gpn / dom, 1e-9),
            "pod_nodes": max(float(topo.pod_gpus) / dom, 1.0),
            "oversub_leaf": float(over.get("leaf", 1.0)),
            "oversub_spine": float(over.get("spine", 1.0)),
        }
    # no sized topology: reference 64-port switches (hardware.LEAF_NODES); a pod of k/2 = 32 leaves;
    # the oversubscription sits above pod_gpus when given, at the leaf otherwise
    leaf = hw.LEAF_NODES[c.topology]
    jobs_nodes = c.gpus / gpn
    pod_set = c.pod_gpus < c.gpus
    return {
        "domain": gpn,
        "leaf_nodes": leaf,
        "pod_nodes": c.pod_gpus / gpn if pod_set else min(32.0 * leaf, jobs_nodes),
        "oversub_leaf": 1.0 if pod_set else c.oversubscription,
        "oversub_spine": c.oversubscription if pod_set else 1.0,
    }


@dataclass
class Layouts:
    """Arrays (float64, equal length) of parallel layouts; recompute as codes 0/1/2, sp as 0/1."""

    tp: Arr
    pp: Arr
    dp: Arr
    cp: Arr
    ep: Arr
    vpp: Arr
    mb: Arr
    recompute: Arr
    zero: Arr
    sp: Arr

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, idx: npt.NDArray[np.intp]) -> Layouts:
        return Layouts(*(getattr(self, f)[idx] for f in LAYOUT_FIELDS))


LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "mb", "recompute", "zero", "sp")


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


def step_flops(ctx: Context, recompute: Arr) -> tuple[float, Arr]:
    """(model FLOPs per step, hardware FLOPs per step per layout): 3x forward, + recomputation."""
    f = flops_per_token(ctx)
    tokens = ctx.global_batch * ctx.seq
    model = 3.0 * f["forward"] * tokens
    # selective recomputes no GEMM; only the unfused attention core (score GEMMs) adds FLOPs
    sel = f["attn_core"] if ctx.unfused_attn else 0.0
    extra = np.where(recompute >= 2, f["layers"], np.where(recompute >= 1, sel, 0.0))
    return model, model + extra * tokens


def params_per_layer(ctx: Context) -> tuple[float, float, float]:
    """(attention params, dense-FFN params, MoE-FFN params: experts, shared+router) per layer."""
    h = ctx.hidden
    attn = 2.0 * h * ctx.q_dim + 2.0 * h * ctx.kv_heads * ctx.head_dim
    dense = ctx.mats * h * ctx.dense_ffn
    return attn, dense, ctx.mats * h * ctx.expert_ffn


def total_params(ctx: Context) -> float:
    attn, dense, expert = params_per_layer(ctx)
    n_moe = ctx.layers - ctx.dense_layers if ctx.moe else 0.0
    moe = ctx.experts * expert + ctx.shared_experts * expert + ctx.hidden * ctx.experts
    return ctx.layers * attn + (ctx.layers - n_moe) * dense + n_moe * moe + 2.0 * ctx.vocab * ctx.hidden


# ----------------------------------------------------------------------------------------- kernel times


def _gemm_time(ctx: Context, m: Arr, k: Arr, n: Arr, count: Arr | float = 1.0, bf16: bool = False) -> Arr:
    """Time of ``count`` GEMMs (m x k) @ (k x n) per GPU: smooth roofline with a fixed per-kernel cost.

    efficiency = eff_max / sqrt(1 + (ridge / intensity)^2): near eff_max for large matrices, bandwidth
    bound for thin ones (small per-GPU matrices at high TP or small micro-batches).
    """
    precision = "bf16" if bf16 else ctx.precision
    b = 2.0 if bf16 else ctx.elem_bytes
    rate = ctx.gpu.peak(precision) * ctx.gpu.gemm_eff(precision)
    flops = 2.0 * m * k * n
    bytes_ = b * (m * k + k * n) + 2.0 * m * n  # outputs stay bf16
    intensity = flops / bytes_
    ridge = rate / ctx.gpu.hbm_bw
    t = flops / rate * np.sqrt(1.0 + (ridge / intensity) ** 2)
    return count * (t + hw.KERNEL_OVERHEAD_S)


def _mem_time(ctx: Context, nbytes: Arr) -> Arr:
    return nbytes / (ctx.gpu.hbm_bw * hw.HBM_EFF)


# -------------------------------------------------------------------------------------------- evaluate


def _profile_arrays(ctx: Context, lay: Layouts) -> dict[str, Arr]:
    """Framework profile fields per layout (``auto``: Megatron-Core with TP or PP, else FSDP; frameworks.py)."""
    fields = {"tp_overlap": "tp_overlap", "grad_overlap": "grad_overlap", "param_overlap": "param_overlap",
              "bucket": "bucket_params", "zero2_per_mb": "zero2_per_microbatch",
              "zero2_shards": "zero2_shards_grads", "z3_prefetch": "zero3_prefetch_layers"}
    fixed = profile(ctx.framework)
    if fixed is not None:
        return {k: np.full_like(lay.tp, float(getattr(fixed, a))) for k, a in fields.items()}
    mega, fsdp = PROFILES["megatron-core"], PROFILES["fsdp"]
    is_mega = (lay.tp > 1) | (lay.pp > 1)
    out = {k: np.where(is_mega, float(getattr(mega, a)), float(getattr(fsdp, a))) for k, a in fields.items()}
    # ZeRO-2 asked for without naming a framework keeps its gradients sharded in memory; with TP/PP the
    # reduction runs once per step (Megatron-Core's distributed optimizer, Meta's Llama 3 stack: fp32
    # accumulation, one reduce-scatter per step), optimistic by the fp32 gradient buffer such stacks hold
    # (docs/performance-model.md, limitations); pure data parallelism reduces at every micro-batch (FSDP)
    out["zero2_shards"] = np.ones_like(lay.tp)
    return out


# -------------------------------------------------------------------------------------------- evaluate


def evaluate(ctx: Context, lay: Layouts) -> dict[str, Arr]:
    """Step time, FLOPs, memory and breakdown for every layout (all arrays of len(lay))."""
    tp, pp, dp, cp, ep, vpp = lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.vpp
    mb, rc, zero, sp = lay.mb, lay.recompute, lay.zero, lay.sp
    h, s, f_d = ctx.hidden, ctx.seq, ctx.dense_ffn
    kvd = ctx.kv_heads * ctx.head_dim
    gpu = ctx.gpu
    net = ctx.net
    prof = _profile_arrays(ctx, lay)

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
        t_attn_core = t_sc + _mem_time(ctx, hw.UNFUSED_SCORE_BYTES_FWD * score_elems) + 2.0 * hw.KERNEL_OVERHEAD_S
        t_attn_core_bwd = (2.0 * t_sc + _mem_time(ctx, hw.UNFUSED_SCORE_BYTES_BWD * score_elems)
                           + 2.0 * hw.KERNEL_OVERHEAD_S)
    else:
        # fused FlashAttention-style kernel: causal half of the counted FLOPs at the family's measured
        # FlashAttention-2 rate (bf16 also in fp8 training); backward 2.5x forward (recomputes P)
        attn_flops = 4.0 * m_tok * s * qd / tp
        attn_rate = gpu.peak_bf16_flops * gpu.attn_eff
        t_attn_core = hw.ATTN_CAUSAL_WORK * attn_flops / attn_rate + 2.0 * hw.KERNEL_OVERHEAD_S
        t_attn_core_bwd = 2.5 * t_attn_core

    def ffn_time(ffn: float, tokens: Arr, count: Arr | float = 1.0) -> Arr:
        return _gemm_time(ctx, tokens, h * ones, (ctx.mats - 1.0) * ffn / tp, count) + _gemm_time(
            ctx, tokens, ffn / tp, h * ones, count
        )

    t_dense_ffn = ffn_time(f_d, m_tok)
    # elementwise traffic per token, forward: 2 layernorms (read+write h), 2 dropout+residual adds
    # (read 2h, write h, mask h), FFN activation (gelu: read+write f; swiglu: read 2f, write f)
    rep_elems = 12.0 * h / sp_div
    act_elems_dense = (ctx.mats) * f_d / tp
    t_ew_dense = _mem_time(ctx, m_tok * BYTES_ACT * (rep_elems + act_elems_dense)) + 6.0 * hw.KERNEL_OVERHEAD_S

    if ctx.moe:
        n_moe = ctx.layers - ctx.dense_layers
        tok_expert = m_tok * ep * ctx.top_k / ctx.experts  # tokens per local expert
        t_moe_ffn = ffn_time(ctx.expert_ffn, tok_expert, ctx.experts / ep)
        if ctx.shared_experts > 0:
            t_shared = ffn_time(ctx.expert_ffn * ctx.shared_experts, m_tok)
            t_moe_ffn = t_moe_ffn + t_shared
        else:
            t_shared = np.zeros_like(tp)
        t_moe_ffn = t_moe_ffn + _gemm_time(ctx, m_tok, h * ones, ctx.experts * ones)  # router
        act_moe = ctx.mats * ctx.expert_ffn * (ctx.top_k + ctx.shared_experts) / tp
        t_ew_moe = _mem_time(ctx, m_tok * BYTES_ACT * (rep_elems + act_moe + 2.0 * ctx.top_k * h / sp_div))
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
    t_sel = t_sel_ew + (t_attn_core if ctx.unfused_attn else 0.0)
    t_layer_rc = np.where(rc >= 2, t_layer_fwd, np.where(rc >= 1, t_sel, 0.0))

    # ---- TP communication per layer per micro-batch: 2 all-reduces (or AG+RS pairs with SP) fwd, 2 bwd,
    # 2 more when the forward is recomputed (full recompute)
    act_bytes = m_tok * h * BYTES_ACT
    t_ar = coll("ar", act_bytes, tp, ones, "tp")
    n_tp = 4.0 + np.where(rc >= 2, 2.0, 0.0)
    t_tp_layer = n_tp * t_ar * (1.0 - prof["tp_overlap"])

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
    if ctx.moe:
        tok_a2a = m_tok / sp_div
        placements["ep"] = cl.place(net, ep, tp)
        t_disp = cl.moe_a2a(net, tok_a2a, h * ctx.elem_bytes, ctx.top_k, ep, tp, placements["ep"])
        t_comb = cl.moe_a2a(net, tok_a2a, h * BYTES_ACT, ctx.top_k, ep, tp, placements["ep"])
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
        t_ep_layer = steady * exposed_ss + (1.0 - steady) * exposed_other
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
    tl = comm_timeline(
        compute=t_compute_mb,
        items={
            "cp": (stage_share * ctx.layers * np.where(cp > 1, t_cp_raw, 0.0), t_cp_mb, on_nic_cp),
            "ep": (stage_share * ctx.layers * (t_ep_layer + t_ep_hidden), t_ep_mb, on_nic_ep),
            "z2": (z2_mb, np.where(prof["grad_overlap"] > 0.5, np.maximum(z2_mb - stage_share * ctx.layers
                   * (t_layer_bwd + t_layer_rc), bucket * z2_mb), z2_mb), on_nic_dp),
            "z3": (z3_mb, np.maximum(0.0, z3_mb - t_compute_mb) + z3_layer * np.where(zero >= 3, 1.0, 0.0)
                   / np.maximum(prof["z3_prefetch"], 1.0), on_nic_dp),
        },
    )
    t_cp_mb = tl["cp"]
    t_ep_mb = tl["ep"]
    dp_mb_exposed = tl["z2"] + tl["z3"]

    # ---- optimizer (memory bound), sharded by ZeRO >= 1
    opt_params = ((params_gpu - expert_gpu) / np.where(zero >= 1, dpc, 1.0)
                  + expert_gpu / np.where(zero >= 1, edp, 1.0))
    t_opt = _mem_time(ctx, opt_params * hw.OPTIMIZER_BYTES_PER_PARAM)

    # ---- interference: collectives hidden behind compute still take SMs and HBM bandwidth from it
    tp_hidden_mb = stage_share * ctx.layers * n_tp * t_ar * prof["tp_overlap"]
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
    # MoE: the FFN part per active expert, plus each dispatched copy of the token (the experts' input,
    # kept in the dispatch precision, 1 B with fp8 dispatch) and each expert output kept for the
    # combine's backward (bf16)
    ffn_act_moe = (((4.0 if ctx.mats == 2.0 else 6.0) - (1.0 if fp8_act else 0.0)) * ctx.expert_ffn
                   * (ctx.top_k + ctx.shared_experts)
                   + (ctx.elem_bytes + BYTES_ACT) * ctx.top_k * h)
    shard_act = (4.0 + (1.0 if fp8_act else 0.0)) * qd + 4.0 * kvd + (1.0 - frac_moe) * ffn_act_dense + frac_moe * ffn_act_moe
    act_layer_tok = rep_act / sp_div + shard_act / tp
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
    scores_tok = 5.0 * ctx.heads * s / np.minimum(tp, ctx.heads) if ctx.unfused_attn else 0.0 * tp
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
    usable = usable_memory_bytes(gpu)
    # last stage also holds the logits
    last_stage = np.where(pp > 1, states + zero3_buffers + m_tok * layers_stage * per_layer_full + logits_mem, 0.0)
    mem = np.maximum(mem, last_stage)

    model_flops, hw_flops = step_flops(ctx, rc)
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


# Datasheet HBM sizes are binary: an "80 GB" H100 has 81,559 MiB (85.5e9 bytes, nvidia-smi), a "40 GB"
# A100 40,960 MiB, a "141 GB" H200 143,771 MiB. The catalog keeps the marketing figure; the bytes a job can
# use are that figure in GiB less what the driver reserves (81,559 of 81,920 MiB on H100: 0.9956).
HBM_BYTES_PER_CATALOG_GB = 2.0**30 / 1e9 * 0.9956


def usable_memory_bytes(gpu: GpuSpec) -> float:
    hbm = gpu.hbm_bytes * HBM_BYTES_PER_CATALOG_GB
    return hbm * (1.0 - hw.MEMORY_FRAGMENTATION) - hw.MEMORY_FIXED_GB * 1e9


def divisors(n: int) -> list[int]:
    out = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(out + [n // d for d in out]))
