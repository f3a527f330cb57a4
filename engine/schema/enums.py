"""Every enumerated value of the scenario document, defined once, with the label people read.

One class per enum, NetBox ``ChoiceSet`` style: the class attributes are the stored values (the strings in
documents and in the database: never change one), ``CHOICES`` pairs each value with its label. The parser
(:mod:`engine.document.parse`) accepts exactly :meth:`ChoiceSet.values`; the API, the portal's forms,
templates, charts and panels show :meth:`ChoiceSet.label`; docs/scenario-format.md lists both.

Pure Python; imports nothing of the engine.
"""

from __future__ import annotations

from typing import ClassVar


class ChoiceSet:
    """A set of (value, label) choices; subclasses set the values as attributes and list them in ``CHOICES``."""

    CHOICES: ClassVar[tuple[tuple[str, str], ...]] = ()

    @classmethod
    def values(cls) -> tuple[str, ...]:
        """The stored values, in order."""
        return tuple(value for value, _ in cls.CHOICES)

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """``[(value, label), ...]`` for a form's or serializer's choices."""
        return list(cls.CHOICES)

    @classmethod
    def label(cls, value: object) -> str:
        """The label of ``value``; an unknown value is shown as it is (an empty one as ``""``)."""
        return dict(cls.CHOICES).get(str(value), "" if value is None else str(value))


class Fabric(ChoiceSet):
    INFINIBAND = "infiniband"
    ROCE = "roce"
    CHOICES = ((INFINIBAND, "InfiniBand"), (ROCE, "Ethernet (RoCE)"))


class TopologyKind(ChoiceSet):
    """The cluster's ``topology`` (the built one is :class:`engine.schema.types.Topology`)."""

    FAT_TREE = "fat-tree"
    RAIL_OPTIMIZED = "rail-optimized"
    MULTI_PLANE = "multi-plane"
    CHOICES = ((FAT_TREE, "Fat-tree"), (RAIL_OPTIMIZED, "Rail-optimized"), (MULTI_PLANE, "Multi-plane"))


class Routing(ChoiceSet):
    """How traffic that leaves a leaf switch picks its uplink (which a switch supports: its ``specs.routing``).

    ``ecmp``: static per-flow hashing, one queue pair (QP) per NCCL connection (NCCL's default); ``ecmp-qp``:
    hashing with several QPs per connection (NCCL_IB_QPS_PER_CONNECTION; Meta's "E-ECMP"); ``adaptive``:
    per-packet / flowlet adaptive routing in the switch (InfiniBand AR, Spectrum-X Ethernet); ``pinned``: static,
    centrally computed routes (subnet-manager / SDN path pinning). The model's efficiency per mode is
    :mod:`engine.fabric.routing`.
    """

    ECMP = "ecmp"
    ECMP_QP = "ecmp-qp"
    ADAPTIVE = "adaptive"
    PINNED = "pinned"
    CHOICES = (
        (ECMP, "ECMP (static hash, one QP per connection)"),
        (ECMP_QP, "ECMP with more QPs per connection"),
        (ADAPTIVE, "Adaptive routing (IB AR, Spectrum-X)"),
        (PINNED, "Pinned routes"),
    )


# Queue pairs per NCCL connection when cluster.qps_per_connection is not given: NCCL's default is 1; Meta's
# Llama 3 RoCE clusters used 4 ("E-ECMP", Gangidi et al., SIGCOMM 2024) and so does ecmp-qp here.
DEFAULT_QPS: dict[str, int] = {Routing.ECMP: 1, Routing.ECMP_QP: 4, Routing.ADAPTIVE: 1, Routing.PINNED: 1}


class Framework(ChoiceSet):
    """The training framework whose documented overlap defaults the performance model applies."""

    MEGATRON_CORE = "megatron-core"
    NEMO = "nemo"
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"
    FSDP2 = "fsdp2"
    CHOICES = ((MEGATRON_CORE, "Megatron-Core"), (NEMO, "NeMo"), (DEEPSPEED, "DeepSpeed"), (FSDP, "PyTorch FSDP"),
               (FSDP2, "PyTorch FSDP2"))


class Precision(ChoiceSet):
    """GEMM precision of the linear layers. ``fp8``: per-tensor scaled fp8 (Transformer Engine delayed / current
    scaling, Hopper and later); ``mxfp8``: block-scaled fp8 (OCP MX, 32-element blocks, E8M0 scales: every
    linear layer; Blackwell only); ``nvfp4``: 4-bit NVFP4 (16-element blocks, E4M3 scales + a per-tensor fp32
    scale) with NVIDIA's recipe (arXiv 2509.25149: some layers in bf16; Blackwell only). The attention core,
    norms and the output layer stay bf16 in every recipe (hardware.NVFP4_BF16_LINEAR_FRACTION)."""

    BF16 = "bf16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"
    CHOICES = ((BF16, "BF16"), (FP8, "FP8"), (MXFP8, "MXFP8 (block-scaled)"), (NVFP4, "NVFP4 (4-bit)"))


class Attention(ChoiceSet):
    """Attention kernel class: fused FlashAttention-2 (warp-level MMA, scores never in HBM), fused architecture-native
    (cuDNN fused attention, FlashAttention-3 on Hopper, -4 on Blackwell: the GPU's own tensor-core instructions) or
    unfused (scores materialised: Megatron-LM 2021-22 scale-mask-softmax + dropout); "auto" is what the stack ran on
    the GPU at its release (frameworks.default_attention)."""

    FLASH = "flash"
    NATIVE = "native"
    UNFUSED = "unfused"
    CHOICES = ((FLASH, "FlashAttention-2 (fused, warp-level MMA)"),
               (NATIVE, "Fused, architecture-native (cuDNN, FlashAttention-3/4)"),
               (UNFUSED, "Unfused (scores in HBM)"))


class Recompute(ChoiceSet):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    CHOICES = ((NONE, "None"), (SELECTIVE, "Selective"), (FULL, "Full"))


class RecomputeModule(ChoiceSet):
    """What selective recomputation regenerates (training.recompute_modules; Megatron-Core --recompute-modules,
    torchtitan selective op checkpointing): the layernorm outputs, the FFN activation-function output, the
    attention core (scores: matters only where they are materialised, unfused), the whole FFN (its GEMMs too), or
    multi-head latent attention's up-projections (Q, K and V regenerated from the kept latents; needs model.mla)."""

    LAYERNORM = "layernorm"
    ACTIVATION = "activation"
    CORE_ATTN = "core_attn"
    MLP = "mlp"
    MLA_UP_PROJ = "mla_up_proj"
    CHOICES = ((LAYERNORM, "Layernorm outputs"), (ACTIVATION, "FFN activation output"),
               (CORE_ATTN, "Attention core"), (MLP, "Whole FFN (GEMMs included)"),
               (MLA_UP_PROJ, "MLA up-projections (Q, K, V from the latents)"))


#: what ``selective`` regenerates when training.recompute_modules is not given: everything except the GEMMs
#: (docs/performance-model.md section 14)
DEFAULT_RECOMPUTE_MODULES = (RecomputeModule.LAYERNORM, RecomputeModule.ACTIVATION, RecomputeModule.CORE_ATTN)


class ActivationCache(ChoiceSet):
    """How the FFN's inner activations (the GeLU / SwiGLU inputs: the FFN-in GEMM outputs) are kept for the backward
    pass: ``bf16`` (every stack's default) or ``fp8`` with one scale per 1 x 128 tile (DeepSeek-V3, arXiv 2412.19437
    Sec. 3.3.3 "Low-precision storage": the SwiGLU inputs cached in FP8). Needs a quantised precision."""

    BF16 = "bf16"
    FP8 = "fp8"
    CHOICES = ((BF16, "bf16"), (FP8, "fp8 (tile-scaled)"))


class OptimizerMoments(ChoiceSet):
    """Number format of Adam's first and second moments: ``fp32`` (mixed-precision default) or ``bf16``
    (DeepSeek-V3 Sec. 3.3.3; Megatron-Core --use-precision-aware-optimizer --exp-avg-dtype bf16
    --exp-avg-sq-dtype bf16). Master weights stay fp32."""

    FP32 = "fp32"
    BF16 = "bf16"
    CHOICES = ((FP32, "fp32"), (BF16, "bf16"))


class MoeDispatcher(ChoiceSet):
    """MoE token dispatcher (Megatron-Core ``--moe-token-dispatcher-type``): ``alltoall`` sends tokens only to
    the EP ranks that hold their experts (NeMo / Megatron-Bridge MoE recipes, DeepSpeed-MoE, MegaScale-MoE);
    ``allgather`` gathers all tokens of the TP x EP group on every rank (Megatron-Core's own default from 2024);
    "auto" is the named framework's default, else alltoall."""

    ALLTOALL = "alltoall"
    ALLGATHER = "allgather"
    CHOICES = ((ALLTOALL, "All-to-all"), (ALLGATHER, "All-gather over TP × EP"))


class DpPlacement(ChoiceSet):
    """Where the data-parallel dimension sits in the rank order (docs/performance-model.md section 3): ``inner`` =
    TP, CP, DP, PP from innermost (Megatron-Core's default order tp-cp-ep-dp-pp, DeepSpeed's, torchtitan's mesh
    [pp, dp_replicate, dp_shard, cp, tp]): DP groups stay close, pipeline neighbours are far apart; ``outer`` =
    TP, CP, PP, DP (Llama 3, arXiv 2407.21783 section 3.3.2: DP outermost because it tolerates latency): DP groups
    span pods, pipeline neighbours are adjacent. "auto" = the named framework's default (``inner``), both searched
    when the framework is auto."""

    INNER = "inner"
    OUTER = "outer"
    CHOICES = ((INNER, "DP inside PP (TP, CP, DP, PP)"), (OUTER, "DP outermost (TP, CP, PP, DP)"))


class CpCommType(ChoiceSet):
    """How context parallelism moves K and V (Megatron-Core ``--cp-comm-type``, Transformer Engine's
    ``cp_comm_type``): ``p2p`` = ring attention, each step's K/V block sent to the next rank while the current one
    is computed (Megatron-Core's default); ``all-gather`` = K and V of the whole sequence gathered before the
    attention kernel and dK/dV reduce-scattered after it, in the critical path (Llama 3, arXiv 2407.21783
    section 3.3.2: "the all-gather communication latency is exposed in the critical path"); ``a2a`` = DeepSpeed-
    Ulysses (arXiv 2309.14509): all-to-alls trade the sequence shard for a share of the heads before the kernel
    (Q, K, V) and back after it (the output), each rank attending over the whole sequence with 1/c of its heads;
    Transformer Engine's AttnFuncWithCPAndQKVOA2A waits for them, so they are in the critical path."""

    P2P = "p2p"
    ALL_GATHER = "all-gather"
    A2A = "a2a"
    CHOICES = ((P2P, "Ring (K/V blocks sent under attention)"), (ALL_GATHER, "All-gather of K/V (exposed)"),
               (A2A, "All-to-all of heads (Ulysses, exposed)"))


class RankAssignment(ChoiceSet):
    """How the job's nodes are ordered among its ranks, relative to the switches (docs/performance-model.md
    section 3, "Which tier the traffic crosses"). NCCL's rings follow the rank order: ``unaligned`` = the
    launcher's host list does not follow the leaves and pods, so a ring neighbour may sit under any of them (the
    model's peer-uniform crossing fraction); ``topology-aware`` = ranks follow leaf and pod order (a scheduler that
    assigns ranks by switch position: Meta's for Llama 3, Slurm's topology plugins with switch-sorted host lists),
    so a ring crosses a tier once per block of the group under it. Collectives whose partners spread over the group
    (all-to-all, PAT, NCCL's double binary tree) cross as unaligned either way."""

    UNALIGNED = "unaligned"
    TOPOLOGY_AWARE = "topology-aware"
    CHOICES = ((UNALIGNED, "Not aligned with the switches"),
               (TOPOLOGY_AWARE, "Topology-aware (ranks follow leaf and pod order)"))


class ExpertKernel(ChoiceSet):
    """Routed-expert (grouped) GEMM kernels of MoE layers: ``warp-mma`` = Ampere-class warp-level MMA kernels
    (CUTLASS 2.x grouped GEMM, cuBLAS 12.5 grouped APIs); ``native`` = the generation's own tensor-core
    instructions (Hopper wgmma: CUTLASS 3.x SM90 grouped GEMM, DeepGEMM, Transformer Engine); "auto" = the
    family default for the precision (hardware.FAMILY_EXPERT_KERNEL)."""

    WARP_MMA = "warp-mma"
    NATIVE = "native"
    CHOICES = ((WARP_MMA, "Warp-level MMA (Ampere-class)"), (NATIVE, "Native tensor-core instructions"))


class LeafPlacement(ChoiceSet):
    """Where the leaf switch sits: in the rack (copper to the NICs), at the end of the row (optics), or auto
    (in the rack when it can)."""

    AUTO = "auto"
    RACK = "rack"
    ROW = "row"
    CHOICES = ((AUTO, "Auto (in the rack when it can)"), (RACK, "In the rack (copper)"), (ROW, "End of row (optics)"))


class FacilityMode(ChoiceSet):
    COLOCATION = "colocation"
    OWNED = "owned"
    CHOICES = ((COLOCATION, "Colocation (per kW-month)"), (OWNED, "Owned (construction capex)"))


class Distribution(ChoiceSet):
    """How a ``{low, likely, high}`` range is sampled by the Monte Carlo."""

    TRIANGULAR = "triangular"
    PERT = "pert"
    CHOICES = ((TRIANGULAR, "Triangular"), (PERT, "PERT (weights the likely value more)"))


#: every choice set by the short name templates and reports use (``{{ value|choice_label:"fabric" }}``)
CHOICE_SETS: dict[str, type[ChoiceSet]] = {
    "fabric": Fabric, "topology": TopologyKind, "routing": Routing, "framework": Framework,
    "precision": Precision, "attention": Attention, "recompute": Recompute, "moe_dispatcher": MoeDispatcher,
    "expert_kernel": ExpertKernel, "leaf_placement": LeafPlacement, "facility_mode": FacilityMode,
    "distribution": Distribution, "dp_placement": DpPlacement, "recompute_module": RecomputeModule,
    "activation_cache": ActivationCache, "optimizer_moments": OptimizerMoments,
    "rank_assignment": RankAssignment, "cp_comm_type": CpCommType,
}
