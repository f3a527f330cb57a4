"""The scenario's types, enums and defaults, defined once.

The parser (:mod:`engine.document.parse`) is the only code that builds these objects from a document; every
other engine module (fabric sizing, topology, performance, cost) reads the frozen :class:`ScenarioSpec` it returns.
The document's fields (keys, defaults, enums, bounds) are declared in :mod:`.fields` and :mod:`.enums`; the
writer :func:`scenario_to_dict` derives from that declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.errors import ScenarioError
from engine.schema.enums import CpCommType, Fabric, LeafPlacement, RankAssignment, Routing, TopologyKind
from engine.schema.fields import (
    ALWAYS,
    AUTO,
    AUTO_OR_VALUE,
    CUSTOM,
    IF_GIVEN,
    IF_NOT_DEFAULT,
    IF_SET,
    section_fields,
)

# The value tuples of the enums (engine.schema.enums), for the modules that test membership.
FABRICS = Fabric.values()
TOPOLOGIES = TopologyKind.values()
ROUTINGS = Routing.values()
LEAF_PLACEMENTS = LeafPlacement.values()


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
    # the engine.fabric.sizing.FabricPlan this topology was built from (switch, optics and cable counts the cost
    # model prices), kept so that a parsed scenario is sized once; opaque here (the fabric layer sits above)
    plan: Any = field(default=None, compare=False, repr=False)

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
class MlaSpec:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): queries and keys/values projected through low-rank
    latents; the names are the models' released configs' (q_lora_rank 0 = queries projected directly)."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0


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
    attention_window: int = 0  # 0 = full attention; else tokens each query attends to (sliding window / chunks)
    mla: MlaSpec | None = None  # multi-head latent attention (None: standard multi-head / grouped-query attention)
    parallel_block: bool = False  # attention and FFN from one layernorm, added together (GPT-J / PaLM block)
    global_attention_every: int = 0  # with attention_window: every k-th layer full attention (0: none)
    mtp_layers: int = 0  # multi-token-prediction modules after the last layer (DeepSeek-V3: 1)

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
    framework: str | None = None  # a Framework value; None = auto
    framework_release: str | None = None  # "YYYY-MM": the framework as it ran then; None = the current release
    expert_kernel: str | None = None  # an ExpertKernel value; None = auto (family and precision default)
    moe_dispatcher: str | None = None  # a MoeDispatcher value; None = auto (frameworks.moe_dispatcher)
    shard_group: int | None = None  # ZeRO shard group size (HSDP); None = every data x context parallel rank
    recompute_modules: tuple[str, ...] | None = None  # RecomputeModule values; None = the default selective set
    activation_cache: str | None = None  # an ActivationCache value; None = bf16
    recompute_layers: int | None = None  # layers of each pipeline chunk recomputed in full; None = all
    optimizer_moments: str | None = None  # an OptimizerMoments value; None = fp32
    cp_comm_type: str = CpCommType.P2P  # a CpCommType value: how context parallelism moves K and V


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
    dp_placement: str | None = None  # a DpPlacement value; None = auto (the framework's default, or both searched)
    etp: int | None = None  # expert tensor-parallel degree (MoE parallel folding); None = auto (= tp)
    embedding_loss_in_split: bool = False  # embedding and loss each take a layer's place in the pipeline split

    def pipeline_slots(self, layers: int) -> int:
        """Places the pipeline split divides among p * v virtual stages: the layers, + 2 when the embedding and
        the loss take one each."""
        return layers + (2 if self.embedding_loss_in_split else 0)

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
    # how the job's nodes are ordered among its ranks (a RankAssignment value): rings cross tiers per block
    rank_assignment: str = RankAssignment.UNALIGNED
    # GPUs the job uses in each rack-scale NVLink domain (cluster.gpus_per_rack); None = all gpus_per_node
    gpus_per_rack: int | None = None
    # a rack-scale system (GB200 / GB300 NVL72: the catalog GPU's node_sizes), sold and cabled as whole racks; set by
    # the parser, the one reader of node_sizes
    rack_scale: bool = False

    @property
    def gpus_used_per_node(self) -> int:
        """GPUs the job uses in each node (NVLink domain) [GPUs]: ``gpus_per_rack`` when set (64 of an NVL72's 72,
        the rest spares), else all ``gpus_per_node``. The layout's NVLink domain and the racks the job takes,
        ceil(gpus / this), follow it; a rack is still bought whole."""
        return self.gpus_per_rack or self.gpus_per_node

    def used_of_node(self, parts: int) -> int:
        """Of ``parts`` per-node parts the node's GPUs fill in order (NICs, compute-tray hosts), those holding the
        job's GPUs [count]: all of them when every GPU is used, else ceil(used x parts / gpus_per_node) (a part
        shared with a spare GPU still counts). NVL72: 64 of 72 GPUs use 64 of 72 NICs and 16 of 18 trays."""
        used = self.gpus_used_per_node
        if used >= self.gpus_per_node:
            return parts
        return -(-used * parts // self.gpus_per_node)

    @property
    def nics_used_per_node(self) -> int:
        """Compute NICs cabled in each node [NICs]: those of its used GPUs (:meth:`used_of_node`)."""
        return self.used_of_node(self.nics_per_node)


@dataclass(frozen=True)
class FabricSettings:
    """Fabric and rack settings that the document keeps under ``costs`` (they change what is built)."""

    server: str | None  # catalog key of the server (rack-scale systems: one "node" = one NVLink domain)
    planes: int | None  # multi-plane only; None = nics_per_node
    nodes_per_rack: int
    leaf_placement: str  # a LeafPlacement value


@dataclass(frozen=True)
class ScenarioSpec:
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
        """The topology (always present on a ScenarioSpec returned by parse_scenario)."""
        if self.topology is None:
            raise ScenarioError("cluster", "scenario was not parsed with parse_scenario (no topology)")
        return self.topology


def _section(spec: Any, section: str) -> dict[str, Any]:
    """The declared keys of ``section`` as the canonical document writes them (each field's ``write``)."""
    out: dict[str, Any] = {}
    for f in section_fields(section):
        if f.write == CUSTOM:
            continue
        value = getattr(spec, f.key)
        if f.write == ALWAYS:
            out[f.key] = value
        elif f.write == AUTO_OR_VALUE:
            out[f.key] = AUTO if value is None else value
        elif (f.write == IF_SET and value != f.unset) or (f.write == IF_GIVEN and getattr(spec, f.given)) or (f.write == IF_NOT_DEFAULT and value != f.default_for({f.default_by: getattr(spec, f.default_by)})):
            out[f.key] = list(value) if isinstance(value, tuple) else value  # a list of choices stays a list
    return out


def _parallelism(p: ParallelismSpec) -> Any:
    """``"auto"`` when every degree is searched, else the degrees (a searched one as ``"auto"`` or its list)."""
    if (all(v is None for v in (p.tp, p.pp, p.dp, p.cp, p.ep, p.vpp, p.sequence_parallel, p.dp_placement, p.etp))
            and not p.embedding_loss_in_split):
        return AUTO
    par = _section(p, "parallelism")
    for key, values in p.choices:
        par[key] = list(values)
    return par


def scenario_to_dict(s: ScenarioSpec) -> dict[str, Any]:
    """The canonical document for ``s`` (defaults filled in; auto settings as ``"auto"``; optional settings that
    were left out stay out), written from the declaration (:mod:`.fields`)."""
    model = _section(s.model, "model")
    if s.model.moe is not None:
        model["moe"] = _section(s.model.moe, "model.moe")
    if s.model.mla is not None:
        model["mla"] = _section(s.model.mla, "model.mla")
    out: dict[str, Any] = {
        "model": model,
        "training": _section(s.training, "training"),
        "parallelism": _parallelism(s.parallelism),
        "cluster": _section(s.cluster, "cluster"),
        **_section(s, ""),  # name, description
    }
    if s.costs is not None:
        out["costs"] = s.costs
    if s.uncertainty is not None:
        out["uncertainty"] = s.uncertainty
    if s.extras.get("calibration") is not None:
        out["calibration"] = s.extras["calibration"]
    if s.extras.get("fabric_study") is not None:
        out["fabric_study"] = s.extras["fabric_study"]
    return out
