"""The model's inputs: the scalars of one scenario (``Context``) and the arrays of layouts (``Layouts``).

``make_context`` reads the parsed ScenarioSpec once: model and batch, the GPU, and the fabric as sized by
``topology.py`` (NVLink domain, leaf and pod sizes, oversubscription per tier, routing). The layout codes
(recompute, ZeRO stage) are named here; the framework profile per layout is frameworks.layout_profiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.fabric.pinned_study import routing_source
from engine.fabric.routing import DCQCN_HEADROOM_EFF, ROCE_FRAMING_EFF
from engine.performance import hardware as hw
from engine.performance.attention_widths import AttentionWidths, attention_widths
from engine.performance.collectives.placement import Net
from engine.performance.datatypes import (
    ADAM_STATE_BYTES,
    ADAM_STATE_BYTES_BF16_MOMENTS,
    BF16_BYTES,
    FP8_BYTES,
)
from engine.performance.frameworks import (
    NCCL_ALL_ALGORITHMS,
    NCCL_NVLS,
    default_attention,
    moe_dispatcher,
    nccl_algorithms,
)
from engine.performance.hardware import GpuSpec
from engine.schema.enums import (
    DEFAULT_QPS,
    DEFAULT_RECOMPUTE_MODULES,
    ActivationCache,
    Attention,
    CpCommType,
    DpPlacement,
    Framework,
    MoeDispatcher,
    OptimizerMoments,
    Precision,
    RankAssignment,
    Recompute,
)
from engine.schema.types import ScenarioSpec
from engine.units import BITS_PER_BYTE, GIGA, Arr, BoolArr

# FFN weight matrices: gated FFNs (SwiGLU: gate, up, down) have three, GeLU FFNs two (up, down).
GATED_FFN_MATRICES = 3.0
PLAIN_FFN_MATRICES = 2.0
# Layout codes (float arrays like the degrees): recompute none / selective / full, ZeRO stages 0-3.
RECOMPUTE_CODES = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.FULL: 2}
RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE_CODES.items()}
RECOMPUTE_SELECTIVE = float(RECOMPUTE_CODES[Recompute.SELECTIVE])
RECOMPUTE_FULL = float(RECOMPUTE_CODES[Recompute.FULL])
ZERO_SHARDS_OPTIMIZER = 1.0  # ZeRO-1: optimizer states sharded over the data-parallel group
ZERO_SHARDS_GRADIENTS = 2.0  # ZeRO-2: and the gradients
ZERO_SHARDS_PARAMETERS = 3.0  # ZeRO-3 / FSDP FULL_SHARD: and the weights (gathered layer by layer)
ZERO_STAGES = (0, 1, 2, 3)
# Where DP sits in the rank order (parallelism.dp_placement), as a layout code: 0 = inner (TP, CP, DP, PP from
# innermost), 1 = outer (TP, CP, PP, DP; Llama 3, arXiv 2407.21783 s.3.3.2). docs/performance-model.md s.3.
DP_PLACEMENT_CODES = {DpPlacement.INNER: 0, DpPlacement.OUTER: 1}
DP_PLACEMENT_NAMES = {v: k for k, v in DP_PLACEMENT_CODES.items()}
DP_OUTER = float(DP_PLACEMENT_CODES[DpPlacement.OUTER])
# Each framework's documented default rank order: Megatron-Core's RankGenerator order "tp-cp-ep-dp-pp" (NeMo runs
# Megatron-Core), DeepSpeed's PipeModelDataParallelTopology axes [pipe, data, model] and torchtitan's FSDP2 device
# mesh [pp, dp_replicate, dp_shard, cp, tp] (parallel_dims.py) all put PP outermost and DP inside it: "inner".
# FSDP (v1) alone has no pipeline dimension, so the order does not matter. A framework left auto searches both.
FRAMEWORK_DP_PLACEMENT: dict[str, str] = {
    Framework.MEGATRON_CORE: DpPlacement.INNER, Framework.NEMO: DpPlacement.INNER,
    Framework.DEEPSPEED: DpPlacement.INNER, Framework.FSDP: DpPlacement.INNER, Framework.FSDP2: DpPlacement.INNER,
}
# No sized topology: reference 64-port switches, a pod of k/2 = 32 leaves (hardware.LEAF_NODES for the leaf).
REFERENCE_POD_LEAVES = 32.0
MIN_LEAF_NODES = 1e-9  # guard: a leaf holds a positive share of an NVLink domain even when nodes_per_leaf is 0


@dataclass(frozen=True)
class Context:
    """Scalars of one scenario (model, batch, GPU, fabric) shared by every layout."""

    layers: int
    pipeline_places: int  # places the pipeline split divides (ParallelismSpec.pipeline_slots): layers (+ 2 with the edges)
    hidden: float
    heads: float
    attn: AttentionWidths  # the attention's per-token widths and projection MACs (standard or MLA)
    unfused_attn: bool  # attention scores materialised in HBM (see hardware.FAMILY_ATTENTION)
    fused_attn_eff: float  # fraction of bf16 peak of the fused kernel class at its reference blocks (terms/attention.py)
    fused_attn_half_len: float  # tokens: the class's block-length curve (0: FlashAttention-2's, short_block_rate)
    expert_gemm_eff: float  # GEMM-rate factor of routed-expert GEMMs (hardware.expert_kernel_factor)
    allgather_dispatch: bool  # MoE tokens gathered over TP x EP (training.moe_dispatcher "allgather")
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
    framework: str | None = None  # None = auto (per layout, frameworks.layout_profiles)
    sharp: bool = False  # in-network reduction (CollNet/SHARP) enabled
    ring_aligned: bool = False  # cluster.rank_assignment topology-aware: rings cross tiers once per block
    cp_allgather: bool = False  # training.cp_comm_type all-gather: K/V gathered before attention, exposed
    cp_a2a: bool = False  # training.cp_comm_type a2a (Ulysses): heads exchanged for the sequence, exposed
    gpus_per_nic: float = 1.0  # GPUs of a node that share one scale-out NIC (gpus_per_node / nics_per_node)
    # calibration hooks (engine.calibration): multiplier on inter-node bandwidth per collective
    # kind ("ar", "ag", "rs", "a2a", "p2p") and a per-step network latency replacing the modelled one
    net_bw_scale: Mapping[str, float] = field(default_factory=dict)
    net_alpha_s: float | None = None
    # a fabric study pinned to the scenario (pinned_study.py, issue #13): what the routing share comes from
    # ({"kind": "study", "share": ...} replaces the shipped tables in routing.crossing_share)
    routing_source: Mapping[str, Any] = field(default_factory=dict)
    # software as it ran (issue #22): training.framework_release (YYYY-MM; None = the current release) and the NCCL
    # algorithms released by then (frameworks.nccl_algorithms: NVLS from 2.17, PAT from 2.23)
    framework_release: str | None = None
    nccl_algorithms: frozenset[str] = NCCL_ALL_ALGORITHMS
    attention_window: float = 0.0  # model.attention_window: tokens each query attends to; 0 = full attention
    parallel_block: bool = False  # model.parallel_block: attention and FFN from one layernorm (terms/block.py)
    global_attention_every: float = 0.0  # model.global_attention_every: every k-th layer full attention; 0 = none
    mtp_layers: float = 0.0  # model.mtp_layers: multi-token-prediction modules on the last rank (terms/mtp.py)
    shard_group: float = 0.0  # training.shard_group: ZeRO shard group size (HSDP); 0 = every DP x CP rank
    # training.recompute_modules: what selective recomputation regenerates (RecomputeModule values)
    recompute_modules: frozenset[str] = frozenset(DEFAULT_RECOMPUTE_MODULES)
    # training.activation_cache "fp8": the FFN-in GEMM outputs kept for the backward in tile-scaled fp8
    fp8_ffn_cache: bool = False
    # training.recompute_layers: layers of each pipeline chunk recomputed in full (block method); 0 = all
    recompute_layers: float = 0.0
    # training.optimizer_moments: Adam state bytes per parameter and HBM bytes per parameter per optimizer step
    adam_state_bytes: float = ADAM_STATE_BYTES
    optimizer_bytes_per_param: float = hw.OPTIMIZER_BYTES_PER_PARAM

    @property
    def attention_kinds(self) -> tuple[tuple[float, float, float], ...]:
        """The layers' attention kinds as (share of the layers, keys per query the FLOP count uses, keys per query a
        causal kernel visits on average). Full attention: s and s/2 (hardware.ATTN_CAUSAL_WORK). A sliding window
        of w: min(w, s) and (w s - w^2/2) / s = w (1 - w / 2s), which is s/2 at w = s. With
        model.global_attention_every k, floor(L / k) of the L layers (every k-th) attend to the whole sequence and
        the rest to the window (Gemma 3's 5 local : 1 global, GPT-OSS's alternation)."""
        full = (self.seq, hw.ATTN_CAUSAL_WORK * self.seq)
        if not self.attention_window or self.attention_window >= self.seq:
            return ((1.0, *full),)
        w = self.attention_window
        local = (w, w * (1.0 - hw.ATTN_CAUSAL_WORK * w / self.seq))
        share = (float(self.layers // int(self.global_attention_every)) / self.layers
                 if self.global_attention_every else 0.0)
        if share <= 0.0:
            return ((1.0, *local),)
        return ((1.0 - share, *local), (share, *full))

    @property
    def attn_keys(self) -> float:
        """Keys per query the attention-core FLOP count uses, averaged over the layers: min(window, seq) on windowed
        layers, seq on full-attention ones (the non-causal convention's s)."""
        return sum(share * keys for share, keys, _ in self.attention_kinds)

    @property
    def attn_causal_keys(self) -> float:
        """Keys per query a causal kernel visits, averaged over the layers (:attr:`attention_kinds`)."""
        return sum(share * causal for share, _, causal in self.attention_kinds)

    @property
    def peak(self) -> float:
        return self.gpu.peak(self.precision)

    @property
    def elem_bytes(self) -> float:
        """Bytes per GEMM operand element: fp8 where asked for and the GPU has fp8 tensor cores, the block-scaled
        formats with their scales (hardware.MXFP8_OPERAND_BYTES, NVFP4_OPERAND_BYTES), else bf16."""
        if self.precision == Precision.MXFP8 and self.gpu.peak_mxfp8_flops is not None:
            return hw.MXFP8_OPERAND_BYTES
        if self.precision == Precision.NVFP4 and self.gpu.peak_nvfp4_flops is not None:
            return hw.NVFP4_OPERAND_BYTES
        return FP8_BYTES if self.precision == Precision.FP8 and self.gpu.peak_fp8_flops is not None else BF16_BYTES

    @property
    def net(self) -> Net:
        g = self.gpu
        scale = {f"bw_scale_{k}": float(v) for k, v in self.net_bw_scale.items()}
        return Net(
            domain=self.domain, job_nodes=max(self.gpus / self.domain, 1.0), leaf_nodes=self.leaf_nodes,
            pod_nodes=self.pod_nodes, oversub_leaf=self.oversub_leaf, oversub_spine=self.oversub_spine,
            tiers=self.tiers, fabric=self.fabric, routing=self.routing,
            qps=self.qps or DEFAULT_QPS.get(self.routing, 1.0), nic_bw_gpu=nic_rate(self),
            nvl_ring=g.nvlink_uni_bw * g.nvlink_ring_eff, nvl_ar=g.nvlink_uni_bw * g.nvlink_ar_eff,
            nvls=g.nvlink_ar_eff > g.nvlink_ring_eff and NCCL_NVLS in self.nccl_algorithms, sharp=self.sharp, alpha_override=self.net_alpha_s,
            ring_aligned=self.ring_aligned,
            gpus_per_nic=self.gpus_per_nic,
            pinned_share=self.routing_source.get("share") if self.routing_source.get("kind") == "study" else None,
            unreleased_algorithms=NCCL_ALL_ALGORITHMS - self.nccl_algorithms,
            **scale,
        )


def make_context(s: ScenarioSpec, gpu: GpuSpec) -> Context:
    m, c, t = s.model, s.cluster, s.training
    hw.check_precision(gpu, t.precision)
    moe = m.moe
    nic_bw = c.nic_gbps * GIGA / BITS_PER_BYTE * c.nics_per_node / c.gpus_per_node * hw.NIC_PROTOCOL_EFF
    net = _fabric_numbers(s)
    # the attention kernel class: the scenario's, else what its stack ran on this GPU family at its release
    attention = t.attention or default_attention(t.framework, t.framework_release, gpu.family, gpu.default_attention)
    qps = float(getattr(c, "qps_per_connection", 0) or 0.0)
    bf16_moments = getattr(t, "optimizer_moments", None) == OptimizerMoments.BF16
    source = routing_source(s.extras.get("fabric_study"), routing=c.routing,
                            qps=qps or DEFAULT_QPS.get(c.routing, 1.0), fabric=c.fabric)
    return Context(
        layers=m.layers,
        pipeline_places=s.parallelism.pipeline_slots(m.layers),
        hidden=float(m.hidden),
        heads=float(m.heads),
        attn=attention_widths(m),
        unfused_attn=attention == Attention.UNFUSED,
        fused_attn_eff=gpu.fused_attn_eff(attention),
        fused_attn_half_len=gpu.fused_attn_half_len(attention),
        expert_gemm_eff=hw.expert_kernel_factor(gpu.family, t.precision, t.expert_kernel),
        allgather_dispatch=moe_dispatcher(t.framework, t.moe_dispatcher) == MoeDispatcher.ALLGATHER,
        dropout=(not m.gated_ffn) if t.dropout is None else t.dropout,
        ffn=float(m.ffn_hidden),
        mats=GATED_FFN_MATRICES if m.gated_ffn else PLAIN_FFN_MATRICES,
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
        gpn=float(min(c.gpus_used_per_node, c.gpus)),
        gpu=gpu,
        nic_bw_gpu=nic_bw,
        gpus_per_nic=c.gpus_per_node / c.nics_per_node,
        routing=c.routing,
        qps=qps,
        routing_source=source,
        tiers=float(c.tiers),
        fabric=c.fabric,
        framework=getattr(t, "framework", None),
        framework_release=getattr(t, "framework_release", None),
        shard_group=float(getattr(t, "shard_group", None) or 0.0),
        recompute_modules=frozenset(getattr(t, "recompute_modules", None) or DEFAULT_RECOMPUTE_MODULES),
        fp8_ffn_cache=getattr(t, "activation_cache", None) == ActivationCache.FP8,
        recompute_layers=float(getattr(t, "recompute_layers", None) or 0.0),
        adam_state_bytes=(ADAM_STATE_BYTES_BF16_MOMENTS if bf16_moments else ADAM_STATE_BYTES),
        optimizer_bytes_per_param=(hw.OPTIMIZER_BYTES_PER_PARAM_BF16_MOMENTS if bf16_moments
                                   else hw.OPTIMIZER_BYTES_PER_PARAM),
        nccl_algorithms=nccl_algorithms(getattr(t, "framework_release", None)),
        # CollNet / SHARP needs InfiniBand switches that reduce in the network and NCCL's CollNet plugin
        # (NCCL_COLLNET_ENABLE=1): on only when the scenario says so (cluster.in_network_reduction)
        sharp=bool(getattr(c, "in_network_reduction", False)) and c.fabric == "infiniband",
        ring_aligned=getattr(c, "rank_assignment", RankAssignment.UNALIGNED) == RankAssignment.TOPOLOGY_AWARE,
        cp_allgather=getattr(t, "cp_comm_type", CpCommType.P2P) == CpCommType.ALL_GATHER,
        cp_a2a=getattr(t, "cp_comm_type", CpCommType.P2P) == CpCommType.A2A,
        domain=net["domain"],
        leaf_nodes=net["leaf_nodes"],
        pod_nodes=net["pod_nodes"],
        oversub_leaf=net["oversub_leaf"],
        oversub_spine=net["oversub_spine"],
        attention_window=float(getattr(m, "attention_window", 0) or 0),
        parallel_block=bool(getattr(m, "parallel_block", False)),
        global_attention_every=float(getattr(m, "global_attention_every", 0) or 0),
        mtp_layers=float(getattr(m, "mtp_layers", 0) or 0),
    )


def nic_rate(ctx: Context) -> float:
    """Bytes/s per GPU the transport delivers: ``ctx.nic_bw_gpu`` (line rate x InfiniBand's efficiency) less
    RoCE's extra framing, and less DCQCN's rate headroom unless the Ethernet fabric routes adaptively
    (Spectrum-X-class fabrics pair adaptive routing with their own telemetry-based congestion control)."""
    if ctx.fabric != "roce":
        return ctx.nic_bw_gpu
    return ctx.nic_bw_gpu * ROCE_FRAMING_EFF * (1.0 if ctx.routing == "adaptive" else DCQCN_HEADROOM_EFF)


def _fabric_numbers(s: ScenarioSpec) -> dict[str, float]:
    """NVLink domain, leaf and pod sizes and per-tier oversubscription from the scenario's topology."""
    c = s.cluster
    gpn = float(min(c.gpus_used_per_node, c.gpus))  # a node as the fabric sized it: the GPUs used of a rack
    topo = getattr(s, "topology", None)
    if topo is not None:
        dom = float(getattr(topo, "nvlink_domain_gpus", gpn) or gpn)
        over = dict(getattr(topo, "oversubscription", {}) or {})
        return {
            "domain": dom,
            "leaf_nodes": max(float(topo.nodes_per_leaf) * gpn / dom, MIN_LEAF_NODES),
            "pod_nodes": max(float(topo.pod_gpus) / dom, 1.0),
            "oversub_leaf": float(over.get("leaf", 1.0)),
            "oversub_spine": float(over.get("spine", 1.0)),
        }
    # no sized topology: reference switches (hardware.LEAF_NODES, REFERENCE_POD_LEAVES); the oversubscription
    # sits above pod_gpus when given, at the leaf otherwise
    leaf = hw.LEAF_NODES[c.topology]
    jobs_nodes = c.gpus / gpn
    pod_set = c.pod_gpus < c.gpus
    return {
        "domain": gpn,
        "leaf_nodes": leaf,
        "pod_nodes": c.pod_gpus / gpn if pod_set else min(REFERENCE_POD_LEAVES * leaf, jobs_nodes),
        "oversub_leaf": 1.0 if pod_set else c.oversubscription,
        "oversub_spine": c.oversubscription if pod_set else 1.0,
    }


@dataclass
class Layouts:
    """Arrays (equal length) of parallel layouts: degrees as float64, recompute as codes 0/1/2
    (``RECOMPUTE_CODES``), ZeRO stage 0-3, sequence parallelism as a bool, DP placement as codes 0/1
    (``DP_PLACEMENT_CODES``; inner when not given), the expert tensor-parallel degree (``parallelism.etp``, MoE
    parallel folding; tp when not given)."""

    tp: Arr
    pp: Arr
    dp: Arr
    cp: Arr
    ep: Arr
    vpp: Arr
    mb: Arr
    recompute: Arr
    zero: Arr
    sp: BoolArr
    dp_order: Arr | None = None  # DP_PLACEMENT_CODES; None = inner everywhere
    etp: Arr | None = None  # expert tensor-parallel degree; None = tp everywhere (no folding)

    def __post_init__(self) -> None:
        if self.dp_order is None:
            self.dp_order = np.zeros_like(self.tp)
        if self.etp is None:
            self.etp = np.array(self.tp, dtype=np.float64)

    @property
    def expert_tp(self) -> Arr:
        """The expert tensor-parallel degree of each layout (``etp``; = tp without MoE parallel folding)."""
        assert self.etp is not None
        return self.etp

    @property
    def folded(self) -> BoolArr:
        """True where the MoE layers' expert TP differs from the attention's TP (MoE parallel folding)."""
        return np.asarray(self.expert_tp != self.tp)

    @property
    def expert_fold(self) -> Arr:
        """etp / tp [ratio]: with sequence parallelism an attention-TP rank holds 1/t of its group's tokens, and an
        expert-TP group of etp ranks gathers etp of those shares, so its routed tokens are etp/t of the attention
        TP group's (exactly 1.0 without folding)."""
        return np.asarray(self.expert_tp / self.tp)

    @property
    def dp_outer(self) -> BoolArr:
        """True where DP is the outermost dimension (TP, CP, PP, DP)."""
        return np.asarray(self.dp_order == DP_OUTER)

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, idx: npt.NDArray[np.intp]) -> Layouts:
        return Layouts(*(getattr(self, f)[idx] for f in LAYOUT_FIELDS))

    def parallelism(self, i: int) -> dict[str, Any]:
        """Layout ``i`` as ``Result.parallelism`` names it."""
        return {"tp": int(self.tp[i]), "pp": int(self.pp[i]), "dp": int(self.dp[i]), "cp": int(self.cp[i]),
                "ep": int(self.ep[i]), "vpp": int(self.vpp[i]), "sequence_parallel": bool(self.sp[i]),
                "micro_batch": int(self.mb[i]), "recompute": RECOMPUTE_NAMES[int(self.recompute[i])],
                "zero": int(self.zero[i]), "dp_placement": DP_PLACEMENT_NAMES[int(self.dp_outer[i])],
                # only where the experts fold differently from attention: an unfolded layout reads as before
                **({"etp": int(self.expert_tp[i])} if bool(self.folded[i]) else {})}


LAYOUT_FIELDS = ("tp", "pp", "dp", "cp", "ep", "vpp", "mb", "recompute", "zero", "sp", "dp_order", "etp")
