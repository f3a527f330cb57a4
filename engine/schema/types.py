"""The scenario's types, enums and defaults, defined once.

The parser (:mod:`engine.document.parse`, which re-exports every name here) is the only code that builds
these objects from a document; every other engine module (fabric sizing, topology, performance, cost) reads the
frozen :class:`Scenario` it returns and imports its enums from here. This module imports nothing of the engine's
but the error base, so any module may import it without an import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import ScenarioError

AUTO = "auto"

PRECISIONS = ("bf16", "fp8")
RECOMPUTE = ("none", "selective", "full")
# attention kernel: "flash" (fused, scores never in HBM) or "unfused" (scores materialised: Megatron-LM
# 2021-22 scale-mask-softmax + dropout); "auto" = the GPU family's default (hardware.FAMILY_ATTENTION)
ATTENTION = ("flash", "unfused")
# routed-expert (grouped) GEMM kernels of MoE layers: "warp-mma" = Ampere-class warp-level MMA kernels
# (CUTLASS 2.x grouped GEMM as in the grouped_gemm package Megatron-Core used, cuBLAS 12.5 grouped APIs),
# "native" = the generation's own tensor-core instructions (Hopper wgmma: CUTLASS 3.x SM90 grouped GEMM,
# DeepGEMM, Transformer Engine per-expert cuBLASLt GEMMs); "auto" = the family default for the precision
# (hardware.FAMILY_EXPERT_KERNEL)
EXPERT_KERNELS = ("warp-mma", "native")
# MoE token dispatcher (Megatron-Core --moe-token-dispatcher-type): "alltoall" = tokens go only to the EP ranks
# that hold their experts (all-to-all over EP, then a gather of the routed copies over TP: what NeMo /
# Megatron-Bridge MoE recipes, DeepSpeed-MoE, HAI-LLM and MegaScale-MoE run); "allgather" = every rank
# gathers all tokens of its TP x EP group (one copy each), keeps those routed to its local experts and
# reduce-scatters the outputs back: Megatron-Core's own default, TransformerConfig.moe_token_dispatcher_type
# = 'allgather' from 2024 (arguments.py of commit f1f03922, Oct 2024) to 2026, which its docs advise
# replacing by 'alltoall' with expert parallelism); "auto" = the named framework's default
# (frameworks.Profile.moe_dispatcher: allgather for megatron-core), else alltoall, what tuned MoE recipes set
MOE_DISPATCHERS = ("alltoall", "allgather")
# training framework whose overlap defaults the performance model applies ("auto" = None: the model's default)
FRAMEWORKS = ("megatron-core", "nemo", "deepspeed", "fsdp", "fsdp2")
FABRICS = ("infiniband", "roce")
TOPOLOGIES = ("fat-tree", "rail-optimized", "multi-plane")
# Routing of traffic that leaves a leaf switch:
#   ecmp     - static per-flow hashing, one queue pair (QP) per NCCL connection (NCCL's default)
#   ecmp-qp  - static hashing with several QPs per connection (NCCL_IB_QPS_PER_CONNECTION; Meta's "E-ECMP")
#   adaptive - per-packet / flowlet adaptive routing in the switch (InfiniBand AR, Spectrum-X Ethernet)
#   pinned   - static, centrally computed routes (subnet-manager / SDN path pinning), no hashing collisions
# Which a switch supports is in its catalog entry (``specs.routing``); the model's efficiency per mode is
# net-B's engine.fabric.routing.
ROUTINGS = ("ecmp", "ecmp-qp", "adaptive", "pinned")
# Queue pairs per NCCL connection when cluster.qps_per_connection is not given: NCCL's default is 1; Meta's
# Llama 3 RoCE clusters used 4 ("E-ECMP", Gangidi et al., SIGCOMM 2024) and so does ecmp-qp here.
DEFAULT_QPS = {"ecmp": 1, "ecmp-qp": 4, "adaptive": 1, "pinned": 1}
# Where the leaf switch sits: "rack" (copper to the NICs), "row" (optics), "auto" (rack when it can)
LEAF_PLACEMENTS = ("auto", "rack", "row")


FloatLike = float | npt.NDArray[np.float64]
# ranged inputs under these sections change performance (predict runs again); under costs they only change prices
PERF_SECTIONS = ("cluster", "training")


@dataclass(frozen=True)
class Range:
    path: tuple[str, ...]
    low: float
    likely: float
    high: float
    dist: str
    integer: bool

    @property
    def field(self) -> str:
        return ".".join(self.path)

    @property
    def affects_performance(self) -> bool:
        return self.path[0] in PERF_SECTIONS

    def value(self, x: float) -> float | int:
        return round(x) if self.integer else float(x)


@dataclass
class CostParams:
    """Resolved cost inputs; each number may be a numpy array of Monte Carlo samples."""

    values: dict[str, FloatLike]
    goodput: dict[str, FloatLike]
    prices: dict[str, FloatLike]  # catalog key -> unit price override
    facility_mode: str
    facility_key: str
    server_key: str | None


@dataclass(frozen=True)
class Topology:
    """One cluster as built. Counts are whole-cluster totals (all planes)."""

    fabric: str  # infiniband | roce
    topology: str  # fat-tree | rail-optimized | multi-plane
    routing: str  # ecmp | ecmp-qp | adaptive | pinned (supported by the switch)
    qps_per_connection: int
    switch: str  # catalog key of the switch model
    nic: str  # catalog key of the NIC model
    radix: int  # switch ports at the link speed (after breakout)
    link_gbps: float  # port speed the links run at (>= the NIC rate)
    nic_gbps: float
    tiers: int  # 1, 2 or 3
    planes: int  # independent fabrics (multi-plane); 1 otherwise
    rails: int  # leaf groups per plane: one per NIC index (rail-optimized), 1 (fat-tree)
    gpus: int
    nodes: int
    gpus_per_node: int
    nics_per_node: int
    nvlink_domain_gpus: int  # GPUs in one NVLink domain (8 for HGX, 72 for NVL72 racks)
    leaf_down_ports: int  # ports of a leaf facing NICs
    leaf_up_ports: int  # ports of a leaf facing spines (0 in a 1-tier fabric)
    nodes_per_leaf: float  # nodes whose same-rail NICs share one leaf (< 1: a node spans several leaves)
    leaf_gpus: int  # GPUs on the nodes under one leaf (per rail), at most gpus
    pod_gpus: int  # GPUs under one pod: non-blocking inside, every path out crosses an oversubscribed or top tier
    max_gpus: int  # most GPUs this switch model and tier count could serve
    switches: Mapping[str, int]  # leaf, spine, core, total
    links: Mapping[str, int]  # node_leaf, leaf_spine, spine_core
    oversubscription: Mapping[str, float]  # built down:up ratio: leaf (leaf->spine), spine (spine->core); >= 1
    hops: Mapping[str, int]  # switches a path crosses when it stays in a leaf, in a pod, or crosses the core
    in_network_reduction: bool = False  # SHARP all-reduce in the switches (asked for, and the switch has it)

    @property
    def nics(self) -> int:
        return self.nodes * self.nics_per_node


@dataclass(frozen=True)
class MoESpec:
    experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int = 0
    dense_layers: int = 0
    dense_ffn_hidden: int = 0


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    gated_ffn: bool
    vocab: int
    seq_len: int
    moe: MoESpec | None = None
    head_dim: int = 0  # 0 = hidden // heads; set for models whose heads are not hidden/heads wide

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads


@dataclass(frozen=True)
class TrainingSpec:
    global_batch: int
    micro_batch: int | None  # None = auto
    precision: str
    recompute: str | None  # None = auto
    tokens: float
    zero: int | None  # None = auto
    attention: str | None = None  # None = auto (family default)
    # hidden dropout (stores a 1-byte mask per element after attention and FFN): None = auto, i.e. off for
    # gated-FFN (SwiGLU-era: Llama, Mistral, Qwen, DeepSeek) models, on for GPT-2/3-style models
    dropout: bool | None = None
    framework: str | None = None  # one of FRAMEWORKS; None = auto
    expert_kernel: str | None = None  # one of EXPERT_KERNELS; None = auto (family and precision default)
    moe_dispatcher: str | None = None  # one of MOE_DISPATCHERS; None = auto (frameworks.moe_dispatcher)


@dataclass(frozen=True)
class ParallelismSpec:
    """Degrees; ``None`` means "auto" (searched). ``dp`` None and not listed as auto means derived.

    ``choices``: degrees given as a list of allowed values (``"ep": [2, 4]``): the degree is searched (None)
    among those values only, e.g. what a source allows when it does not say which it used."""

    tp: int | None
    pp: int | None
    dp: int | None
    cp: int | None
    ep: int | None
    vpp: int | None
    sequence_parallel: bool | None
    choices: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def allowed(self, key: str) -> tuple[int, ...] | None:
        """The values a searched degree may take, or None for every value the search would try."""
        return dict(self.choices).get(key)

    @property
    def any_auto(self) -> bool:
        return any(v is None for v in (self.tp, self.pp, self.dp, self.cp, self.ep, self.vpp, self.sequence_parallel))


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster as asked for; ``tiers`` is the tier count the fabric sizing built (see :class:`Topology`)."""

    gpu: str
    gpus: int
    gpus_per_node: int
    nics_per_node: int
    nic_gbps: float
    fabric: str
    topology: str
    tiers: int
    oversubscription: float
    pod_gpus: int
    routing: str
    switch: str | None = None  # as given (None = default by fabric and speed; see topology.switch)
    nic: str | None = None  # as given (None = default by speed; see topology.nic)
    qps_per_connection: int = 1
    # cluster.tiers was set explicitly (else the smallest that fits); not compared: a canonical document writes
    # the built count, which sizes to the same fabric
    tiers_given: bool = field(default=False, compare=False)
    # cluster.pod_gpus was set explicitly: non-blocking pods of that size, oversubscription only above them
    pod_given: bool = field(default=False, compare=False)
    # NCCL CollNet / SHARP all-reduce in the switches (NCCL_COLLNET_ENABLE=1); needs a switch with SHARP
    in_network_reduction: bool = False


@dataclass(frozen=True)
class FabricSettings:
    """Fabric and rack settings that the document keeps under ``costs`` (they change what is built)."""

    server: str | None  # catalog key of the server (rack-scale systems: one "node" = one NVLink domain)
    planes: int | None  # multi-plane only; None = nics_per_node
    nodes_per_rack: int
    leaf_placement: str  # one of LEAF_PLACEMENTS


@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    training: TrainingSpec
    parallelism: ParallelismSpec
    cluster: ClusterSpec
    name: str = ""
    description: str = ""
    costs: dict[str, Any] | None = None  # the document's costs section as written (ranges included)
    uncertainty: dict[str, Any] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    fabric: FabricSettings | None = None
    topology: Topology | None = None  # the cluster the fabric sizing built; set by parse_scenario
    cost_params: CostParams | None = None  # costs resolved at their likely values, defaults filled
    ranges: Mapping[str, Range] = field(default_factory=dict)  # dotted field -> Range (low/likely/high)

    @property
    def topo(self) -> Topology:
        """The topology (always present on a Scenario returned by parse_scenario)."""
        if self.topology is None:
            raise ScenarioError("cluster", "scenario was not parsed with parse_scenario (no topology)")
        return self.topology


def _auto(v: Any) -> Any:
    return AUTO if v is None else v


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    """The canonical document for ``s`` (defaults filled in; auto settings as ``"auto"``)."""
    m = s.model
    model: dict[str, Any] = {
        "name": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
        "ffn_hidden": m.ffn_hidden, "gated_ffn": m.gated_ffn, "vocab": m.vocab, "seq_len": m.seq_len,
    }
    if m.head_dim:  # only when it differs from hidden/heads, so older documents keep their canonical form
        model["head_dim"] = m.head_dim
    if m.moe is not None:
        model["moe"] = {
            "experts": m.moe.experts, "top_k": m.moe.top_k, "expert_ffn_hidden": m.moe.expert_ffn_hidden,
            "shared_experts": m.moe.shared_experts, "dense_layers": m.moe.dense_layers,
            "dense_ffn_hidden": m.moe.dense_ffn_hidden,
        }
    t = s.training
    p = s.parallelism
    c = s.cluster
    par: Any
    if all(v is None for v in (p.tp, p.pp, p.dp, p.cp, p.ep, p.vpp, p.sequence_parallel)):
        par = AUTO
    else:
        par = {
            "tp": _auto(p.tp), "pp": _auto(p.pp), "cp": _auto(p.cp), "ep": _auto(p.ep), "vpp": _auto(p.vpp),
            "sequence_parallel": _auto(p.sequence_parallel),
        }
        for key, values in p.choices:
            par[key] = list(values)
        if p.dp is not None:
            par["dp"] = p.dp
    cluster: dict[str, Any] = {
        "gpu": c.gpu, "gpus": c.gpus, "gpus_per_node": c.gpus_per_node, "nics_per_node": c.nics_per_node,
        "nic_gbps": c.nic_gbps, "fabric": c.fabric, "topology": c.topology, "tiers": c.tiers,
        "oversubscription": c.oversubscription, "routing": c.routing,
    }
    if c.pod_given:  # a default pod (the whole cluster) is not written: writing it would change its meaning
        cluster["pod_gpus"] = c.pod_gpus
    if c.in_network_reduction:
        cluster["in_network_reduction"] = True
    if c.qps_per_connection != DEFAULT_QPS[c.routing]:
        cluster["qps_per_connection"] = c.qps_per_connection
    if c.switch is not None:
        cluster["switch"] = c.switch
    if c.nic is not None:
        cluster["nic"] = c.nic
    out: dict[str, Any] = {
        "model": model,
        "training": {
            "global_batch": t.global_batch, "micro_batch": _auto(t.micro_batch), "precision": t.precision,
            "recompute": _auto(t.recompute), "tokens": t.tokens, "zero": _auto(t.zero),
        },
        "parallelism": par,
        "cluster": cluster,
    }
    if t.attention is not None:
        out["training"]["attention"] = t.attention
    if t.dropout is not None:
        out["training"]["dropout"] = t.dropout
    if t.framework is not None:
        out["training"]["framework"] = t.framework
    if t.expert_kernel is not None:
        out["training"]["expert_kernel"] = t.expert_kernel
    if t.moe_dispatcher is not None:
        out["training"]["moe_dispatcher"] = t.moe_dispatcher
    if s.name:
        out["name"] = s.name
    if s.description:
        out["description"] = s.description
    if s.costs is not None:
        out["costs"] = s.costs
    if s.uncertainty is not None:
        out["uncertainty"] = s.uncertainty
    if s.extras.get("calibration") is not None:
        out["calibration"] = s.extras["calibration"]
    if s.extras.get("fabric_study") is not None:
        out["fabric_study"] = s.extras["fabric_study"]
    return out
