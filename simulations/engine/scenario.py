"""The scenario document: parse and validate into frozen dataclasses.

A scenario is a JSON-like mapping (see docs/scenario-format.md). ``parse_scenario`` checks every field and
raises :class:`ScenarioError` naming the offending field (``"parallelism.tp: 3 does not divide
model.heads=64"``). ``"auto"`` settings are kept as ``None`` and resolved by the search in
:mod:`simulations.engine.perf`. ``costs`` and ``uncertainty`` belong to the TCO module and are passed
through untouched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulations.engine.catalog import Catalog, CatalogError, get_item
from simulations.engine.errors import ScenarioError  # re-exported: the error base lives in errors.py

AUTO = "auto"

TOP_KEYS = {"model", "training", "parallelism", "cluster", "costs", "uncertainty", "name", "description"}
REQUIRED_TOP = ("model", "training", "parallelism", "cluster")
MODEL_KEYS = {
    "name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "gated_ffn", "vocab", "seq_len", "moe",
}
MODEL_REQUIRED = ("layers", "hidden", "heads", "vocab", "seq_len")
MOE_KEYS = {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "dense_layers", "dense_ffn_hidden"}
TRAINING_KEYS = {"global_batch", "micro_batch", "precision", "recompute", "tokens", "zero", "attention", "dropout"}
TRAINING_REQUIRED = ("global_batch", "tokens")
PAR_KEYS = {"tp", "pp", "dp", "cp", "ep", "vpp", "sequence_parallel"}
CLUSTER_KEYS = {
    "gpu", "gpus", "gpus_per_node", "nics_per_node", "nic_gbps", "fabric", "topology", "tiers",
    "oversubscription", "pod_gpus", "routing", "switch", "nic",
}
CLUSTER_REQUIRED = ("gpu", "gpus")
PRECISIONS = ("bf16", "fp8")
RECOMPUTE = ("none", "selective", "full")
# attention kernel: "flash" (fused, scores never in HBM) or "unfused" (scores materialised: Megatron-LM
# 2021-22 scale-mask-softmax + dropout); "auto" = the GPU family's default (hardware.FAMILY_ATTENTION)
ATTENTION = ("flash", "unfused")
FABRICS = ("infiniband", "roce")
TOPOLOGIES = ("fat-tree", "rail-optimized", "multi-plane")
ROUTINGS = ("adaptive", "ecmp")
SWITCH_RADIX = 64  # ports of the reference 51.2 Tb/s switch (Quantum-2 QM9700 64x400G) used to derive tiers


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


@dataclass(frozen=True)
class ParallelismSpec:
    """Degrees; ``None`` means "auto" (searched). ``dp`` None and not listed as auto means derived."""

    tp: int | None
    pp: int | None
    dp: int | None
    cp: int | None
    ep: int | None
    vpp: int | None
    sequence_parallel: bool | None

    @property
    def any_auto(self) -> bool:
        return any(v is None for v in (self.tp, self.pp, self.dp, self.cp, self.ep, self.vpp, self.sequence_parallel))


@dataclass(frozen=True)
class ClusterSpec:
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
    switch: str | None = None
    nic: str | None = None


@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    training: TrainingSpec
    parallelism: ParallelismSpec
    cluster: ClusterSpec
    name: str = ""
    description: str = ""
    costs: dict[str, Any] | None = None
    uncertainty: dict[str, Any] | None = None
    extras: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------- helpers


def _mapping(doc: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ScenarioError(path, f"must be an object, got {type(doc).__name__}")
    return doc


def _check_keys(doc: Mapping[str, Any], allowed: set[str], required: tuple[str, ...], path: str) -> None:
    for key in doc:
        if key not in allowed:
            raise ScenarioError(f"{path}.{key}" if path else str(key), f"unknown key; allowed: {', '.join(sorted(allowed))}")
    for key in required:
        if key not in doc:
            raise ScenarioError(f"{path}.{key}" if path else key, "is required")


def _int(doc: Mapping[str, Any], key: str, path: str, default: Any = None, minimum: int = 1,
         allow_auto: bool = False) -> Any:
    name = f"{path}.{key}"
    value = doc.get(key, default)
    if value is None:
        raise ScenarioError(name, "is required")
    if isinstance(value, str):
        if allow_auto and value == AUTO:
            return None
        extra = ' or "auto"' if allow_auto else ""
        raise ScenarioError(name, f"must be an integer{extra}, got {value!r}")
    if isinstance(value, bool):
        raise ScenarioError(name, f"must be an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ScenarioError(name, f"must be an integer, got {value!r}")
        value = int(value)
    if not isinstance(value, int):
        raise ScenarioError(name, f"must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ScenarioError(name, f"must be >= {minimum}, got {value}")
    return value


def _number(doc: Mapping[str, Any], key: str, path: str, default: float | None = None,
            minimum: float = 0.0, strict: bool = True) -> float:
    name = f"{path}.{key}"
    value = doc.get(key, default)
    if value is None:
        raise ScenarioError(name, "is required")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(name, f"must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ScenarioError(name, f"must be finite, got {value}")
    if (strict and value <= minimum) or (not strict and value < minimum):
        raise ScenarioError(name, f"must be {'>' if strict else '>='} {minimum:g}, got {value:g}")
    return value


def _choice(doc: Mapping[str, Any], key: str, path: str, options: tuple[str, ...], default: str | None,
            allow_auto: bool = False) -> str | None:
    name = f"{path}.{key}"
    value = doc.get(key, default)
    if value is None:
        raise ScenarioError(name, "is required")
    if allow_auto and value == AUTO:
        return None
    if not isinstance(value, str) or value not in options:
        extra = ' or "auto"' if allow_auto else ""
        raise ScenarioError(name, f"must be one of {', '.join(options)}{extra}, got {value!r}")
    return value


def _bool(doc: Mapping[str, Any], key: str, path: str, default: bool | None, allow_auto: bool = False) -> bool | None:
    value = doc.get(key, default)
    if allow_auto and value == AUTO:
        return None
    if not isinstance(value, bool):
        raise ScenarioError(f"{path}.{key}", f"must be true or false, got {value!r}")
    return value


# --------------------------------------------------------------------------------------------- sections


def _parse_moe(doc: Any, hidden: int, layers: int) -> MoESpec:
    path = "model.moe"
    d = _mapping(doc, path)
    _check_keys(d, MOE_KEYS, ("experts", "top_k", "expert_ffn_hidden"), path)
    experts = _int(d, "experts", path)
    top_k = _int(d, "top_k", path)
    if top_k > experts:
        raise ScenarioError(f"{path}.top_k", f"{top_k} exceeds model.moe.experts={experts}")
    dense_layers = _int(d, "dense_layers", path, default=0, minimum=0)
    if dense_layers >= layers:
        raise ScenarioError(f"{path}.dense_layers", f"{dense_layers} must be fewer than model.layers={layers}")
    return MoESpec(
        experts=experts,
        top_k=top_k,
        expert_ffn_hidden=_int(d, "expert_ffn_hidden", path),
        shared_experts=_int(d, "shared_experts", path, default=0, minimum=0),
        dense_layers=dense_layers,
        dense_ffn_hidden=_int(d, "dense_ffn_hidden", path, default=4 * hidden),
    )


def _parse_model(doc: Any) -> ModelSpec:
    path = "model"
    d = _mapping(doc, path)
    _check_keys(d, MODEL_KEYS, MODEL_REQUIRED, path)
    layers = _int(d, "layers", path)
    hidden = _int(d, "hidden", path)
    heads = _int(d, "heads", path)
    if hidden % heads and d.get("head_dim") is None:
        raise ScenarioError("model.heads", f"{heads} does not divide model.hidden={hidden} (give model.head_dim)")
    kv_heads = _int(d, "kv_heads", path, default=heads)
    if kv_heads > heads or heads % kv_heads:
        raise ScenarioError("model.kv_heads", f"{kv_heads} must divide model.heads={heads}")
    name = d.get("name", "model")
    if not isinstance(name, str):
        raise ScenarioError("model.name", f"must be a string, got {name!r}")
    moe = _parse_moe(d["moe"], hidden, layers) if d.get("moe") is not None else None
    head_dim = _int(d, "head_dim", path) if d.get("head_dim") is not None else 0
    if head_dim == hidden // heads:
        head_dim = 0
    return ModelSpec(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=_int(d, "ffn_hidden", path, default=4 * hidden),
        gated_ffn=bool(_bool(d, "gated_ffn", path, default=False)),
        vocab=_int(d, "vocab", path),
        seq_len=_int(d, "seq_len", path),
        moe=moe,
        head_dim=head_dim,
    )


def _parse_training(doc: Any) -> TrainingSpec:
    path = "training"
    d = _mapping(doc, path)
    _check_keys(d, TRAINING_KEYS, TRAINING_REQUIRED, path)
    zero = d.get("zero", 1)
    if zero == AUTO:
        zero_v: int | None = None
    else:
        zero_v = _int(d, "zero", path, default=1, minimum=0)
        if zero_v > 3:
            raise ScenarioError("training.zero", f"must be 0, 1, 2, 3 or \"auto\", got {zero_v}")
    return TrainingSpec(
        global_batch=_int(d, "global_batch", path),
        micro_batch=_int(d, "micro_batch", path, default=AUTO, allow_auto=True),
        precision=str(_choice(d, "precision", path, PRECISIONS, "bf16")),
        recompute=_choice(d, "recompute", path, RECOMPUTE, AUTO, allow_auto=True),
        tokens=_number(d, "tokens", path),
        zero=zero_v,
        attention=_choice(d, "attention", path, ATTENTION, AUTO, allow_auto=True),
        dropout=None if d.get("dropout", AUTO) == AUTO else _bool(d, "dropout", path, default=None),
    )


def _parse_parallelism(doc: Any) -> ParallelismSpec:
    path = "parallelism"
    if doc == AUTO:
        return ParallelismSpec(None, None, None, None, None, None, None)
    d = _mapping(doc, path)
    _check_keys(d, PAR_KEYS, (), path)
    vals: dict[str, int | None] = {}
    for key in ("tp", "pp", "cp", "ep", "vpp"):
        vals[key] = _int(d, key, path, default=1, allow_auto=True)
    # dp omitted = derived from gpus; "auto" = searched together with the others
    vals["dp"] = _int(d, "dp", path, allow_auto=True) if "dp" in d else None
    return ParallelismSpec(
        tp=vals["tp"], pp=vals["pp"], dp=vals["dp"], cp=vals["cp"], ep=vals["ep"], vpp=vals["vpp"],
        sequence_parallel=_bool(d, "sequence_parallel", path, default=None, allow_auto=True)
        if "sequence_parallel" in d else None,
    )


def default_tiers(gpus: int, gpus_per_node: int, nics_per_node: int, topology: str) -> int:
    """Switch tiers of a non-blocking fat-tree of 64-port switches: 1 tier <= 64 NICs, 2 <= 2048, else 3.

    A multi-plane network counts NICs per plane (one NIC per node in each plane).
    """
    nodes = math.ceil(gpus / gpus_per_node)
    endpoints = nodes if topology == "multi-plane" else nodes * nics_per_node
    if endpoints <= SWITCH_RADIX:
        return 1
    if endpoints <= SWITCH_RADIX * SWITCH_RADIX // 2:
        return 2
    return 3


def _parse_cluster(doc: Any, catalog: Catalog | None) -> ClusterSpec:
    path = "cluster"
    d = _mapping(doc, path)
    _check_keys(d, CLUSTER_KEYS, CLUSTER_REQUIRED, path)
    gpu = d["gpu"]
    if not isinstance(gpu, str):
        raise ScenarioError("cluster.gpu", f"must be a catalog key string, got {gpu!r}")
    try:
        item = get_item(gpu, "gpu", "cluster.gpu", catalog)
    except CatalogError as exc:
        raise ScenarioError("cluster.gpu", exc.message) from exc
    gpus = _int(d, "gpus", path)
    gpn = _int(d, "gpus_per_node", path, default=8)
    if gpus % gpn and gpus > gpn:
        raise ScenarioError("cluster.gpus", f"{gpus} is not a multiple of cluster.gpus_per_node={gpn}")
    nics = _int(d, "nics_per_node", path, default=gpn)
    nic_default = item.get("specs", {}).get("default_nic_gbps", 400)
    nic_gbps = _number(d, "nic_gbps", path, default=float(nic_default))
    fabric = str(_choice(d, "fabric", path, FABRICS, "infiniband"))
    topology = str(_choice(d, "topology", path, TOPOLOGIES, "fat-tree"))
    tiers = _int(d, "tiers", path, default=default_tiers(gpus, gpn, nics, topology))
    if tiers > 3:
        raise ScenarioError("cluster.tiers", f"must be 1, 2 or 3, got {tiers}")
    oversub = _number(d, "oversubscription", path, default=1.0)
    if oversub < 1.0:
        raise ScenarioError("cluster.oversubscription", f"must be >= 1.0 (1.0 = non-blocking), got {oversub:g}")
    pod = _int(d, "pod_gpus", path, default=gpus)
    pod = min(pod, gpus)
    routing = str(_choice(d, "routing", path, ROUTINGS, "adaptive" if fabric == "infiniband" else "ecmp"))
    switch = d.get("switch")
    if switch is not None and not isinstance(switch, str):
        raise ScenarioError("cluster.switch", f"must be a catalog key string, got {switch!r}")
    nic = d.get("nic")
    if nic is not None and not isinstance(nic, str):
        raise ScenarioError("cluster.nic", f"must be a catalog key string, got {nic!r}")
    return ClusterSpec(
        gpu=gpu, gpus=gpus, gpus_per_node=gpn, nics_per_node=nics, nic_gbps=nic_gbps, fabric=fabric,
        topology=topology, tiers=tiers, oversubscription=oversub, pod_gpus=pod, routing=routing,
        switch=switch, nic=nic,
    )


def _check_layout(s: Scenario) -> None:
    """Cross-field checks for degrees that are given (auto ones are checked by the search)."""
    m, t, p, c = s.model, s.training, s.parallelism, s.cluster
    if p.tp is not None and m.heads % p.tp:
        raise ScenarioError("parallelism.tp", f"{p.tp} does not divide model.heads={m.heads}")
    if p.pp is not None and p.pp > m.layers:
        raise ScenarioError("parallelism.pp", f"{p.pp} exceeds model.layers={m.layers}")
    if p.cp is not None and m.seq_len % p.cp:
        raise ScenarioError("parallelism.cp", f"{p.cp} does not divide model.seq_len={m.seq_len}")
    if p.vpp is not None and p.pp is not None:
        if p.vpp > 1 and p.pp == 1:
            raise ScenarioError("parallelism.vpp", "interleaving (vpp > 1) needs parallelism.pp > 1")
        if p.pp * p.vpp > m.layers:
            raise ScenarioError("parallelism.vpp", f"pp*vpp={p.pp * p.vpp} exceeds model.layers={m.layers}")
    if p.ep is not None and p.ep > 1:
        if m.moe is None:
            raise ScenarioError("parallelism.ep", f"{p.ep} needs a mixture-of-experts model (model.moe)")
        if m.moe.experts % p.ep:
            raise ScenarioError("parallelism.ep", f"{p.ep} does not divide model.moe.experts={m.moe.experts}")
    fixed = [v for v in (p.tp, p.pp, p.cp) if v is not None]
    prod = math.prod(fixed)
    if c.gpus % prod:
        raise ScenarioError("parallelism", f"tp*pp*cp={prod} does not divide cluster.gpus={c.gpus}")
    if p.tp is not None and p.pp is not None and p.cp is not None:
        if p.dp is not None and p.tp * p.pp * p.dp * p.cp != c.gpus:
            raise ScenarioError(
                "parallelism.dp",
                f"tp*pp*dp*cp={p.tp * p.pp * p.dp * p.cp} != cluster.gpus={c.gpus}",
            )
        dp = p.dp if p.dp is not None else c.gpus // prod
        if p.ep is not None and p.ep > 1 and (dp * p.cp) % p.ep:
            raise ScenarioError("parallelism.ep", f"{p.ep} does not divide dp*cp={dp * p.cp}")
        if t.global_batch % dp:
            raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by dp={dp}")
        if t.micro_batch is not None and t.global_batch % (dp * t.micro_batch):
            raise ScenarioError(
                "training.global_batch",
                f"{t.global_batch} is not divisible by dp*micro_batch={dp * t.micro_batch}",
            )
    elif p.dp is not None and t.global_batch % p.dp:
        raise ScenarioError("training.global_batch", f"{t.global_batch} is not divisible by dp={p.dp}")


def parse_scenario(doc: Mapping[str, Any] | Scenario, catalog: Catalog | None = None) -> Scenario:
    """Validate ``doc`` and return a :class:`Scenario` (an already parsed Scenario is returned as is)."""
    if isinstance(doc, Scenario):
        return doc
    d = _mapping(doc, "scenario")
    _check_keys(d, TOP_KEYS, REQUIRED_TOP, "")
    name = d.get("name", "")
    if not isinstance(name, str):
        raise ScenarioError("name", f"must be a string, got {name!r}")
    description = d.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError("description", f"must be a string, got {description!r}")
    for key in ("costs", "uncertainty"):
        if d.get(key) is not None and not isinstance(d[key], Mapping):
            raise ScenarioError(key, "must be an object")
    scenario = Scenario(
        model=_parse_model(d["model"]),
        training=_parse_training(d["training"]),
        parallelism=_parse_parallelism(d["parallelism"]),
        cluster=_parse_cluster(d["cluster"], catalog),
        name=name,
        description=description,
        costs=dict(d["costs"]) if d.get("costs") is not None else None,
        uncertainty=dict(d["uncertainty"]) if d.get("uncertainty") is not None else None,
    )
    if scenario.parallelism.tp is not None and scenario.cluster.gpus % scenario.parallelism.tp:
        raise ScenarioError("parallelism.tp", f"{scenario.parallelism.tp} does not divide cluster.gpus")
    _check_layout(scenario)
    return scenario


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
        if p.dp is not None:
            par["dp"] = p.dp
    cluster: dict[str, Any] = {
        "gpu": c.gpu, "gpus": c.gpus, "gpus_per_node": c.gpus_per_node, "nics_per_node": c.nics_per_node,
        "nic_gbps": c.nic_gbps, "fabric": c.fabric, "topology": c.topology, "tiers": c.tiers,
        "oversubscription": c.oversubscription, "pod_gpus": c.pod_gpus, "routing": c.routing,
    }
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
    if s.name:
        out["name"] = s.name
    if s.description:
        out["description"] = s.description
    if s.costs is not None:
        out["costs"] = s.costs
    if s.uncertainty is not None:
        out["uncertainty"] = s.uncertainty
    return out
