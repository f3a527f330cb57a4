"""The scenario document: the one parser, into the frozen :class:`ScenarioSpec` of :mod:`engine.schema.types`.

A scenario is a JSON-like mapping (see docs/scenario-format.md). ``parse_scenario`` is the only code that reads
it: ``predict``, ``tco`` and save-time validation (``validate_scenario``) all call it, so they refuse exactly the
same documents. It

* finds every ``{low, likely, high}`` range (:mod:`.ranges`) and builds the scenario at the ``likely`` values,
  keeping the ranges on ``scenario.ranges``;
* checks every number against the one bounds table (:mod:`.bounds`) and every cross-field rule, raising
  :class:`ScenarioError` naming the offending field (``"parallelism.tp: 3 does not divide model.heads=64"``);
* resolves the ``costs`` section (:func:`.costs.resolve_costs`) and the fabric settings kept there (server,
  planes, nodes per rack, leaf placement);
* sizes the fabric once (:func:`.topology.build_topology`) and keeps the result as ``scenario.topology``: an
  unbuildable fabric (too many GPUs for the switch and tier count, a NIC given as a switch, a routing mode the
  switch lacks) is refused here, naming the field.

``"auto"`` settings are kept as ``None`` and resolved by the search in :mod:`engine.performance.api`.
The keys, static defaults, enums and bounds it checks are declared once in :mod:`engine.schema.fields`; the
dataclasses it builds are :mod:`engine.schema.types`. Every error carries a machine code (:mod:`engine.errors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from engine.catalog import CatalogError, CatalogItems, get_item, items_of_kind
from engine.document.costs_section import cooling_of, resolve_costs
from engine.document.layout_checks import check_layout
from engine.document.ranges import find_ranges, likely_scenario
from engine.errors import (
    LAYOUT_CONFLICT,
    NOT_A_CHOICE,
    REQUIRED,
    UNBUILDABLE_FABRIC,
    UNKNOWN_CATALOG_KEY,
    UNKNOWN_KEY,
    WRONG_TYPE,
    ScenarioError,
)
from engine.fabric.pinned_study import check_fabric_study
from engine.fabric.sizing import DEFAULT_SERVER_FOR_GPU
from engine.fabric.topology import build_topology
from engine.schema.bounds import check_int, check_number, check_release
from engine.schema.calibration import check_calibration_section
from engine.schema.fields import AUTO, BY_PATH, field, keys, required
from engine.schema.types import (
    ClusterSpec,
    FabricSettings,
    ModelSpec,
    MoESpec,
    ParallelismSpec,
    ScenarioSpec,
    Topology,
    TrainingSpec,
)

# Every section's keys and required keys come from the one declaration (engine.schema.fields). The platform's
# "calibration" (a fleet's calibration profile, engine.calibration, issue #16) and "fabric_study" (a team's fabric
# study pinned to the scenario, engine.fabric.pinned_study, issue #13) are kept in ScenarioSpec.extras.
TOP_KEYS = keys("")
REQUIRED_TOP = required("")
MODEL_KEYS = keys("model")
MODEL_REQUIRED = required("model")
MOE_KEYS = keys("model.moe")
MOE_REQUIRED = required("model.moe")
TRAINING_KEYS = keys("training")
TRAINING_REQUIRED = required("training")
PAR_KEYS = keys("parallelism")
CLUSTER_KEYS = keys("cluster")
CLUSTER_REQUIRED = required("cluster")
DEFAULT_NODES_PER_RACK = 4  # four 8-GPU HGX servers per 40-45 kW rack when the server item does not say


# --------------------------------------------------------------------------------------------- helpers


class _Declared:
    """The default of a helper's ``default``: the field's static default in the declaration."""


DECLARED: Any = _Declared()


def _declared_default(name: str) -> Any:
    f = BY_PATH.get(name)
    if f is None or f.required or f.default_by:
        return None
    return f.default


def _mapping(doc: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ScenarioError(path, f"must be an object, got {type(doc).__name__}", WRONG_TYPE)
    return doc


def _check_keys(doc: Mapping[str, Any], allowed: set[str], required: tuple[str, ...], path: str) -> None:
    for key in doc:
        if key not in allowed:
            raise ScenarioError(f"{path}.{key}" if path else str(key), f"unknown key; allowed: {', '.join(sorted(allowed))}",
                                UNKNOWN_KEY)
    for key in required:
        if key not in doc:
            raise ScenarioError(f"{path}.{key}" if path else key, "is required", REQUIRED)


def _int(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> Any:
    """An integer field, checked against its bound in :data:`engine.schema.bounds.BOUNDS`; ``"auto"`` (None)
    where the declaration accepts it."""
    name = f"{path}.{key}"
    value = doc.get(key, _declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    allow_auto = field(name).auto
    if allow_auto and value == AUTO:
        return None
    if isinstance(value, str):
        extra = ' or "auto"' if allow_auto else ""
        raise ScenarioError(name, f"must be an integer{extra}, got {value!r}", WRONG_TYPE)
    return check_int(value, name)


def _number(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> float:
    """A number field, checked against its bound in :data:`engine.schema.bounds.BOUNDS`."""
    name = f"{path}.{key}"
    value = doc.get(key, _declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    return check_number(value, name)


def _choice(doc: Mapping[str, Any], key: str, path: str, default: Any = DECLARED) -> str | None:
    """A value of the field's enum (:mod:`engine.schema.enums`); ``"auto"`` (None) where the declaration accepts it."""
    name = f"{path}.{key}"
    f = field(name)
    assert f.choices is not None, name
    value = doc.get(key, _declared_default(name) if default is DECLARED else default)
    if value is None:
        raise ScenarioError(name, "is required", REQUIRED)
    if f.auto and value == AUTO:
        return None
    options = f.choices.values()
    if not isinstance(value, str) or value not in options:
        extra = ' or "auto"' if f.auto else ""
        raise ScenarioError(name, f"must be one of {', '.join(options)}{extra}, got {value!r}", NOT_A_CHOICE)
    return value


def _bool(doc: Mapping[str, Any], key: str, path: str, default: bool | None, allow_auto: bool = False) -> bool | None:
    value = doc.get(key, default)
    if allow_auto and value == AUTO:
        return None
    if not isinstance(value, bool):
        raise ScenarioError(f"{path}.{key}", f"must be true or false, got {value!r}", WRONG_TYPE)
    return value


def _key(doc: Mapping[str, Any], key: str, path: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ScenarioError(f"{path}.{key}", f"must be a catalog key string, got {value!r}", WRONG_TYPE)
    return value


# --------------------------------------------------------------------------------------------- sections


def _parse_moe(doc: Any, hidden: int, layers: int) -> MoESpec:
    path = "model.moe"
    d = _mapping(doc, path)
    _check_keys(d, MOE_KEYS, MOE_REQUIRED, path)
    experts = _int(d, "experts", path)
    top_k = _int(d, "top_k", path)
    if top_k > experts:
        raise ScenarioError(f"{path}.top_k", f"{top_k} exceeds model.moe.experts={experts}")
    dense_layers = _int(d, "dense_layers", path)
    if dense_layers >= layers:
        raise ScenarioError(f"{path}.dense_layers", f"{dense_layers} must be fewer than model.layers={layers}")
    return MoESpec(
        experts=experts,
        top_k=top_k,
        expert_ffn_hidden=_int(d, "expert_ffn_hidden", path),
        shared_experts=_int(d, "shared_experts", path),
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
    name = d.get("name", _declared_default("model.name"))
    if not isinstance(name, str):
        raise ScenarioError("model.name", f"must be a string, got {name!r}", WRONG_TYPE)
    moe = _parse_moe(d["moe"], hidden, layers) if d.get("moe") is not None else None
    head_dim = _int(d, "head_dim", path) if d.get("head_dim") is not None else 0
    if head_dim == hidden // heads:
        head_dim = 0
    seq_len = _int(d, "seq_len", path)
    window = _int(d, "attention_window", path) if d.get("attention_window") is not None else 0
    if window >= seq_len:
        window = 0  # a window as long as the sequence is full attention
    return ModelSpec(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=_int(d, "ffn_hidden", path, default=4 * hidden),
        gated_ffn=bool(_bool(d, "gated_ffn", path, default=_declared_default("model.gated_ffn"))),
        vocab=_int(d, "vocab", path),
        seq_len=seq_len,
        moe=moe,
        head_dim=head_dim,
        attention_window=window,
    )


def _parse_training(doc: Any) -> TrainingSpec:
    path = "training"
    d = _mapping(doc, path)
    _check_keys(d, TRAINING_KEYS, TRAINING_REQUIRED, path)
    return TrainingSpec(
        global_batch=_int(d, "global_batch", path),
        micro_batch=_int(d, "micro_batch", path),
        precision=str(_choice(d, "precision", path)),
        recompute=_choice(d, "recompute", path),
        tokens=_number(d, "tokens", path),
        zero=_int(d, "zero", path),  # 0-3 (the bound) or "auto"
        attention=_choice(d, "attention", path),
        dropout=None if d.get("dropout", AUTO) == AUTO else _bool(d, "dropout", path, default=None),
        framework=_choice(d, "framework", path),
        framework_release=(check_release(d["framework_release"], f"{path}.framework_release")
                           if d.get("framework_release") is not None else None),
        expert_kernel=_choice(d, "expert_kernel", path),
        moe_dispatcher=_choice(d, "moe_dispatcher", path),
        shard_group=_int(d, "shard_group", path),  # None = auto (every DP x CP rank)
    )


def _parse_parallelism(doc: Any) -> ParallelismSpec:
    path = "parallelism"
    if doc == AUTO:
        return ParallelismSpec(None, None, None, None, None, None, None)
    d = _mapping(doc, path)
    _check_keys(d, PAR_KEYS, (), path)
    vals: dict[str, int | None] = {}
    choices: list[tuple[str, tuple[int, ...]]] = []
    for key in ("tp", "pp", "cp", "ep", "vpp"):
        if isinstance(d.get(key), list):  # searched among the values given
            allowed = _int_choices(d[key], f"{path}.{key}")
            if len(allowed) == 1:
                vals[key] = allowed[0]
            else:
                vals[key] = None
                choices.append((key, allowed))
            continue
        vals[key] = _int(d, key, path)  # default 1, or "auto"
    # dp omitted = derived from gpus; "auto" = searched together with the others
    vals["dp"] = _int(d, "dp", path) if "dp" in d else None
    return ParallelismSpec(
        tp=vals["tp"], pp=vals["pp"], dp=vals["dp"], cp=vals["cp"], ep=vals["ep"], vpp=vals["vpp"],
        sequence_parallel=_bool(d, "sequence_parallel", path, default=None, allow_auto=True)
        if "sequence_parallel" in d else None,
        choices=tuple(choices),
        dp_placement=_choice(d, "dp_placement", path),
    )


MAX_DEGREE_CHOICES = 16  # values in one degree's list: a planner's short list, not an enumeration


def _int_choices(values: list[Any], name: str) -> tuple[int, ...]:
    """A degree given as a list of allowed values: 1 to 16 integers, each within the degree's bound."""
    if not values or len(values) > MAX_DEGREE_CHOICES:
        raise ScenarioError(name, f"a list of allowed values must hold 1 to {MAX_DEGREE_CHOICES} integers, "
                                  f"got {len(values)}")
    return tuple(sorted({check_int(v, name) for v in values}))


def _cluster_fields(doc: Any, catalog: CatalogItems | None) -> ClusterSpec:
    """The cluster section's own fields; ``tiers`` is the given count (0 = auto) until the fabric is sized."""
    path = "cluster"
    d = _mapping(doc, path)
    _check_keys(d, CLUSTER_KEYS, CLUSTER_REQUIRED, path)
    gpu = d["gpu"]
    if not isinstance(gpu, str):
        raise ScenarioError("cluster.gpu", f"must be a catalog key string, got {gpu!r}", WRONG_TYPE)
    try:
        item = get_item(gpu, "gpu", "cluster.gpu", catalog)
    except CatalogError as exc:
        raise ScenarioError("cluster.gpu", exc.message, UNKNOWN_CATALOG_KEY) from exc
    gpus = _int(d, "gpus", path)
    specs = item.get("specs") or {}
    gpn = _int(d, "gpus_per_node", path, default=int(specs.get("default_gpus_per_node", 8)))
    sizes = [int(n) for n in specs.get("node_sizes") or ()]
    if sizes and gpn not in sizes:
        raise ScenarioError("cluster.gpus_per_node", f"{gpu} comes in {' or '.join(map(str, sizes))}-GPU NVLink "
                                                     f"domains (rack-scale system), got {gpn}")
    if gpus % gpn and gpus > gpn:
        raise ScenarioError("cluster.gpus", f"{gpus} is not a multiple of cluster.gpus_per_node={gpn}")
    nics = _int(d, "nics_per_node", path, default=gpn)
    nic_gbps = _number(d, "nic_gbps", path, default=float(specs.get("default_nic_gbps", 400)))
    fabric = str(_choice(d, "fabric", path))
    topology = str(_choice(d, "topology", path))
    tiers_given = d.get("tiers") not in (None, AUTO)
    tiers = _int(d, "tiers", path) if tiers_given else 0
    oversub = _number(d, "oversubscription", path)
    pod_given = d.get("pod_gpus") is not None
    pod = min(_int(d, "pod_gpus", path, default=gpus), gpus)
    routing = str(_choice(d, "routing", path, default=field("cluster.routing").default_for({"fabric": fabric})))
    qps = _int(d, "qps_per_connection", path, default=field("cluster.qps_per_connection").default_for({"routing": routing}))
    return ClusterSpec(
        gpu=gpu, gpus=gpus, gpus_per_node=gpn, nics_per_node=nics, nic_gbps=nic_gbps, fabric=fabric,
        topology=topology, tiers=tiers, oversubscription=oversub, pod_gpus=pod, routing=routing,
        switch=_key(d, "switch", path), nic=_key(d, "nic", path), qps_per_connection=qps, tiers_given=tiers_given,
        pod_given=pod_given,
        in_network_reduction=bool(_bool(d, "in_network_reduction", path,
                                        default=_declared_default("cluster.in_network_reduction"))),
    )


def _server(key: str | None, c: ClusterSpec, catalog: CatalogItems | None) -> str | None:
    """The server holding ``c.gpus_per_node`` x ``c.gpu``: ``costs.server`` (checked) or the catalog's match.

    Without ``costs.server`` and with no matching catalog server this is None: performance needs no server,
    pricing does (``tco`` then asks for ``costs.server``).
    """
    if key is not None:
        try:
            item = get_item(key, "server", "costs.server", catalog)
        except CatalogError as exc:
            raise ScenarioError("costs.server", exc.message, UNKNOWN_CATALOG_KEY) from exc
        specs = item.get("specs") or {}
        if specs.get("gpu") != c.gpu:
            raise ScenarioError("costs.server", f"server {key} holds {specs.get('gpu')}, not cluster.gpu={c.gpu}")
        held = int(specs.get("gpus_per_server", c.gpus_per_node))
        if held != c.gpus_per_node:
            raise ScenarioError("cluster.gpus_per_node", f"{c.gpus_per_node} does not match server {key} ({held} GPUs)")
        return key
    return default_server_key(c.gpu, c.gpus_per_node, catalog)


def default_server_key(gpu: str, gpus_per_node: int, catalog: CatalogItems | None = None) -> str | None:
    """The catalog server that holds ``gpus_per_node`` x ``gpu`` (the engine's default for the GPU first), or None.

    8 x H100-SXM -> HGX-H100; 72 x GB300 -> GB300-NVL72 (one rack-scale NVLink domain).
    """
    matches = sorted(k for k, v in items_of_kind("server", catalog).items()
                     if (v.get("specs") or {}).get("gpu") == gpu
                     and int((v.get("specs") or {}).get("gpus_per_server", 0)) == gpus_per_node)
    preferred = DEFAULT_SERVER_FOR_GPU.get(gpu)
    if preferred in matches:
        return preferred
    return matches[0] if matches else None


def _fabric_settings(costs: Any, c: ClusterSpec, catalog: CatalogItems | None) -> FabricSettings:
    """The settings under ``costs`` that change what is built (already checked for unknown keys)."""
    d: Mapping[str, Any] = costs if isinstance(costs, Mapping) else {}
    server = _server(_key(d, "server", "costs"), c, catalog)
    npr_default = DEFAULT_NODES_PER_RACK
    if server is not None:
        npr_default = int((get_item(server, "server", "costs.server", catalog).get("specs") or {})
                          .get("nodes_per_rack", DEFAULT_NODES_PER_RACK))
    planes = None if d.get("planes") in (None, AUTO) else _int(d, "planes", "costs")
    return FabricSettings(
        server=server,
        planes=planes,
        nodes_per_rack=_int(d, "nodes_per_rack", "costs", default=npr_default),
        leaf_placement=str(_choice(d, "leaf_placement", "costs")),
    )


def _with_topology(s: ScenarioSpec, catalog: CatalogItems | None) -> ScenarioSpec:
    """The scenario with its fabric sized; a fabric that cannot be built is refused with the code
    ``unbuildable_fabric`` (errors that already carry a code of their own keep it)."""
    try:
        topo = build_topology(s, catalog)
    except ScenarioError as exc:
        if exc.code != ScenarioError.default_code:
            raise
        raise ScenarioError(exc.field, exc.message, UNBUILDABLE_FABRIC) from exc
    return replace(s, cluster=replace(s.cluster, tiers=topo.tiers), topology=topo)


def parse_cluster(doc: Any, catalog: CatalogItems | None = None, costs: Mapping[str, Any] | None = None) -> ClusterSpec:
    """Parse a ``cluster`` section alone (fleet plans); its fabric is sized, so ``tiers`` is the built count."""
    c = _cluster_fields(doc, catalog)
    fabric = _fabric_settings(costs, c, catalog)
    # a throwaway model/training is not needed: sizing reads only the cluster and the fabric settings
    probe = ScenarioSpec(model=_PROBE_MODEL, training=_PROBE_TRAINING, parallelism=_PROBE_PAR, cluster=c, fabric=fabric)
    return _with_topology(probe, catalog).cluster


_PROBE_MODEL = ModelSpec("probe", 1, 1, 1, 1, 1, False, 1, 1)
_PROBE_TRAINING = TrainingSpec(1, 1, "bf16", "none", 1.0, 0)
_PROBE_PAR = ParallelismSpec(1, 1, 1, 1, 1, 1, False)


_parse_cluster = parse_cluster  # name the fleet helper used before it was public


def _calibration_extras(section: Any) -> dict[str, Any]:
    """The document's ``calibration`` section, checked by the calibration package (through
    :mod:`.extensions`: that package imports this one)."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ScenarioError("calibration", "must be an object (a calibration profile)", WRONG_TYPE)
    check_calibration_section(section)
    return {"calibration": dict(section)}


def _fabric_study_extras(section: Any) -> dict[str, Any]:
    """The document's ``fabric_study`` section (a pinned study, :mod:`.pinned_study`), validated."""
    if section is None:
        return {}
    return {"fabric_study": check_fabric_study(section)}


def parse_scenario(doc: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None) -> ScenarioSpec:
    """Validate ``doc`` and return a :class:`ScenarioSpec` (an already parsed ScenarioSpec is returned as is).

    Ranges are replaced by their ``likely`` values (kept on ``scenario.ranges``); the fabric is sized once
    (``scenario.topology``); the ``costs`` section is resolved (``scenario.cost_params``).
    """
    if isinstance(doc, ScenarioSpec):
        return doc
    raw = _mapping(doc, "scenario")
    _check_keys(raw, TOP_KEYS, REQUIRED_TOP, "")
    for key in ("costs", "uncertainty"):
        if raw.get(key) is not None and not isinstance(raw[key], Mapping):
            raise ScenarioError(key, "must be an object", WRONG_TYPE)
    ranges = find_ranges(raw)
    d = likely_scenario(raw, ranges) if ranges else raw
    name = d.get("name", _declared_default("name"))
    if not isinstance(name, str):
        raise ScenarioError("name", f"must be a string, got {name!r}", WRONG_TYPE)
    description = d.get("description", _declared_default("description"))
    if not isinstance(description, str):
        raise ScenarioError("description", f"must be a string, got {description!r}", WRONG_TYPE)
    model = _parse_model(d["model"])
    training = _parse_training(d["training"])
    parallelism = _parse_parallelism(d["parallelism"])
    cluster = _cluster_fields(d["cluster"], catalog)
    fabric = _fabric_settings(d.get("costs"), cluster, catalog)
    server = get_item(fabric.server, "server", "costs.server", catalog) if fabric.server else None
    cost_params = resolve_costs(d.get("costs"), catalog, cooling=cooling_of(server))
    scenario = ScenarioSpec(
        model=model,
        training=training,
        parallelism=parallelism,
        cluster=cluster,
        name=name,
        description=description,
        costs=dict(raw["costs"]) if raw.get("costs") is not None else None,
        uncertainty=dict(raw["uncertainty"]) if raw.get("uncertainty") is not None else None,
        fabric=fabric,
        cost_params=cost_params,
        ranges=dict(ranges),
        extras={**_calibration_extras(raw.get("calibration")), **_fabric_study_extras(raw.get("fabric_study"))},
    )
    if scenario.parallelism.tp is not None and scenario.cluster.gpus % scenario.parallelism.tp:
        raise ScenarioError("parallelism.tp", f"{scenario.parallelism.tp} does not divide cluster.gpus", LAYOUT_CONFLICT)
    check_layout(scenario)
    return _with_topology(scenario, catalog)


def topology_for(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None) -> Topology:
    """The topology (the fabric sizing's result) of a scenario document or parsed :class:`ScenarioSpec`."""
    return parse_scenario(scenario, catalog).topo
