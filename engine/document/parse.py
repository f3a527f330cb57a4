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
from engine.document.readers import (
    check_keys,
    declared_default,
    read_bool,
    read_choice,
    read_choice_set,
    read_int,
    read_key,
    read_mapping,
    read_number,
)
from engine.errors import (
    LAYOUT_CONFLICT,
    UNBUILDABLE_FABRIC,
    UNKNOWN_CATALOG_KEY,
    WRONG_TYPE,
    ScenarioError,
)
from engine.fabric.pinned_study import check_fabric_study
from engine.fabric.sizing import DEFAULT_SERVER_FOR_GPU
from engine.fabric.topology import build_topology
from engine.schema.bounds import check_int, check_release
from engine.schema.calibration import check_calibration_section
from engine.schema.enums import ActivationCache, Precision, Recompute
from engine.schema.fields import AUTO, field, keys, required
from engine.schema.types import (
    ClusterSpec,
    FabricSettings,
    MlaSpec,
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
MLA_KEYS = keys("model.mla")
MLA_REQUIRED = required("model.mla")
TRAINING_KEYS = keys("training")
TRAINING_REQUIRED = required("training")
PAR_KEYS = keys("parallelism")
CLUSTER_KEYS = keys("cluster")
CLUSTER_REQUIRED = required("cluster")
DEFAULT_NODES_PER_RACK = 4  # four 8-GPU HGX servers per 40-45 kW rack when the server item does not say


# --------------------------------------------------------------------------------------------- sections


def _parse_moe(doc: Any, hidden: int, layers: int) -> MoESpec:
    path = "model.moe"
    d = read_mapping(doc, path)
    check_keys(d, MOE_KEYS, MOE_REQUIRED, path)
    experts = read_int(d, "experts", path)
    top_k = read_int(d, "top_k", path)
    if top_k > experts:
        raise ScenarioError(f"{path}.top_k", f"{top_k} exceeds model.moe.experts={experts}")
    dense_layers = read_int(d, "dense_layers", path)
    if dense_layers >= layers:
        raise ScenarioError(f"{path}.dense_layers", f"{dense_layers} must be fewer than model.layers={layers}")
    return MoESpec(
        experts=experts,
        top_k=top_k,
        expert_ffn_hidden=read_int(d, "expert_ffn_hidden", path),
        shared_experts=read_int(d, "shared_experts", path),
        dense_layers=dense_layers,
        dense_ffn_hidden=read_int(d, "dense_ffn_hidden", path, default=4 * hidden),
    )


def _parse_mla(doc: Any) -> MlaSpec:
    path = "model.mla"
    d = read_mapping(doc, path)
    check_keys(d, MLA_KEYS, MLA_REQUIRED, path)
    return MlaSpec(kv_lora_rank=read_int(d, "kv_lora_rank", path), qk_nope_head_dim=read_int(d, "qk_nope_head_dim", path),
                   qk_rope_head_dim=read_int(d, "qk_rope_head_dim", path), v_head_dim=read_int(d, "v_head_dim", path),
                   q_lora_rank=read_int(d, "q_lora_rank", path))


def parse_model(doc: Any) -> ModelSpec:
    path = "model"
    d = read_mapping(doc, path)
    check_keys(d, MODEL_KEYS, MODEL_REQUIRED, path)
    layers = read_int(d, "layers", path)
    hidden = read_int(d, "hidden", path)
    heads = read_int(d, "heads", path)
    if hidden % heads and d.get("head_dim") is None:
        raise ScenarioError("model.heads", f"{heads} does not divide model.hidden={hidden} (give model.head_dim)")
    kv_heads = read_int(d, "kv_heads", path, default=heads)
    if kv_heads > heads or heads % kv_heads:
        raise ScenarioError("model.kv_heads", f"{kv_heads} must divide model.heads={heads}")
    name = d.get("name", declared_default("model.name"))
    if not isinstance(name, str):
        raise ScenarioError("model.name", f"must be a string, got {name!r}", WRONG_TYPE)
    moe = _parse_moe(d["moe"], hidden, layers) if d.get("moe") is not None else None
    mla = _parse_mla(d["mla"]) if d.get("mla") is not None else None
    if mla is not None and d.get("head_dim") is not None:
        raise ScenarioError("model.head_dim", "model.mla sets the head widths (qk_nope_head_dim, qk_rope_head_dim, "
                                              "v_head_dim): leave model.head_dim out")
    if mla is not None and kv_heads != heads:
        raise ScenarioError("model.kv_heads", f"with model.mla every head has its own K and V: kv_heads must be "
                                              f"model.heads={heads} (or left out), got {kv_heads}")
    head_dim = read_int(d, "head_dim", path) if d.get("head_dim") is not None else 0
    if head_dim == hidden // heads:
        head_dim = 0
    seq_len = read_int(d, "seq_len", path)
    window = read_int(d, "attention_window", path) if d.get("attention_window") is not None else 0
    every = read_int(d, "global_attention_every", path) if d.get("global_attention_every") is not None else 0
    if every and not window:
        raise ScenarioError("model.global_attention_every", "needs model.attention_window (the window the other "
                                                            "layers use)")
    if every > layers:
        raise ScenarioError("model.global_attention_every", f"{every} is more than model.layers={layers}: no layer "
                                                            f"would be global (leave it out)")
    if window >= seq_len or every == 1:
        window, every = 0, 0  # a window as long as the sequence, or every layer global, is full attention
    parallel_block = bool(read_bool(d, "parallel_block", path, default=declared_default("model.parallel_block")))
    if parallel_block and moe is not None:
        raise ScenarioError("model.parallel_block", "the parallel block is modelled for dense models only: leave "
                                                    "model.parallel_block out (or false) with model.moe")
    return ModelSpec(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn_hidden=read_int(d, "ffn_hidden", path, default=4 * hidden),
        gated_ffn=bool(read_bool(d, "gated_ffn", path, default=declared_default("model.gated_ffn"))),
        vocab=read_int(d, "vocab", path),
        seq_len=seq_len,
        moe=moe,
        head_dim=head_dim,
        attention_window=window,
        mla=mla,
        parallel_block=parallel_block,
        global_attention_every=every,
        mtp_layers=read_int(d, "mtp_layers", path, default=0),
    )


def parse_training(doc: Any) -> TrainingSpec:
    path = "training"
    d = read_mapping(doc, path)
    check_keys(d, TRAINING_KEYS, TRAINING_REQUIRED, path)
    precision, recompute = str(read_choice(d, "precision", path)), read_choice(d, "recompute", path)
    return TrainingSpec(
        global_batch=read_int(d, "global_batch", path),
        micro_batch=read_int(d, "micro_batch", path),
        precision=precision,
        recompute=recompute,
        tokens=read_number(d, "tokens", path),
        zero=read_int(d, "zero", path),  # 0-3 (the bound) or "auto"
        attention=read_choice(d, "attention", path),
        dropout=None if d.get("dropout", AUTO) == AUTO else read_bool(d, "dropout", path, default=None),
        framework=read_choice(d, "framework", path),
        framework_release=(check_release(d["framework_release"], f"{path}.framework_release")
                           if d.get("framework_release") is not None else None),
        expert_kernel=read_choice(d, "expert_kernel", path),
        moe_dispatcher=read_choice(d, "moe_dispatcher", path),
        cp_comm_type=str(read_choice(d, "cp_comm_type", path)),
        shard_group=read_int(d, "shard_group", path),  # None = auto (every DP x CP rank)
        recompute_modules=read_choice_set(d, "recompute_modules", path),
        activation_cache=_activation_cache(d, path, precision),
        optimizer_moments=read_choice(d, "optimizer_moments", path),
        recompute_layers=_recompute_layers(d, path, recompute),
    )


def _recompute_layers(d: Mapping[str, Any], path: str, recompute: str | None) -> int | None:
    """training.recompute_layers: only with full recomputation (``recompute``, None = auto; the block method's
    layer count)."""
    value = read_int(d, "recompute_layers", path) if d.get("recompute_layers") is not None else None
    if value is not None and recompute != Recompute.FULL:
        raise ScenarioError(f"{path}.recompute_layers", f"needs training.recompute full, got {recompute or AUTO!r}")
    return value


def _activation_cache(d: Mapping[str, Any], path: str, precision: str) -> str | None:
    """training.activation_cache; fp8 needs a quantised precision (its quantisation kernels and scales are fp8
    training's)."""
    value = read_choice(d, "activation_cache", path)
    if value == ActivationCache.FP8 and precision == Precision.BF16:
        raise ScenarioError(f"{path}.activation_cache", "fp8 needs training.precision fp8, mxfp8 or nvfp4, got bf16")
    return value


def parse_parallelism(doc: Any) -> ParallelismSpec:
    path = "parallelism"
    if doc == AUTO:
        return ParallelismSpec(None, None, None, None, None, None, None)
    d = read_mapping(doc, path)
    check_keys(d, PAR_KEYS, (), path)
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
        vals[key] = read_int(d, key, path)  # default 1, or "auto"
    # dp omitted = derived from gpus; "auto" = searched together with the others
    vals["dp"] = read_int(d, "dp", path) if "dp" in d else None
    return ParallelismSpec(
        tp=vals["tp"], pp=vals["pp"], dp=vals["dp"], cp=vals["cp"], ep=vals["ep"], vpp=vals["vpp"],
        sequence_parallel=read_bool(d, "sequence_parallel", path, default=None, allow_auto=True)
        if "sequence_parallel" in d else None,
        choices=tuple(choices),
        dp_placement=read_choice(d, "dp_placement", path),
        etp=read_int(d, "etp", path),  # None = auto (= tp: no folding)
        embedding_loss_in_split=bool(read_bool(d, "embedding_loss_in_split", path,
                                               default=declared_default("parallelism.embedding_loss_in_split"))),
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
    d = read_mapping(doc, path)
    check_keys(d, CLUSTER_KEYS, CLUSTER_REQUIRED, path)
    gpu = d["gpu"]
    if not isinstance(gpu, str):
        raise ScenarioError("cluster.gpu", f"must be a catalog key string, got {gpu!r}", WRONG_TYPE)
    try:
        item = get_item(gpu, "gpu", "cluster.gpu", catalog)
    except CatalogError as exc:
        raise ScenarioError("cluster.gpu", exc.message, UNKNOWN_CATALOG_KEY) from exc
    gpus = read_int(d, "gpus", path)
    specs = item.get("specs") or {}
    gpn = read_int(d, "gpus_per_node", path, default=int(specs.get("default_gpus_per_node", 8)))
    sizes = [int(n) for n in specs.get("node_sizes") or ()]
    if sizes and gpn not in sizes:
        raise ScenarioError("cluster.gpus_per_node", f"{gpu} comes in {' or '.join(map(str, sizes))}-GPU NVLink "
                                                     f"domains (rack-scale system), got {gpn}")
    # a rack-scale system (the catalog's node_sizes: sold as whole NVL72 racks) takes any GPU count: the job fills
    # ceil(gpus / gpn) racks and the last one is partial (its NVLink domain and cabled NICs are the GPUs used,
    # fabric sizing); 128 GB300 = two racks, as 64 of 72 in each would be. An HGX job uses whole servers.
    # cluster.gpus_per_rack (rack-scale only) says how many of each rack's GPUs the job uses: ceil(gpus / it) racks.
    if gpus % gpn and gpus > gpn and not sizes:
        raise ScenarioError("cluster.gpus", f"{gpus} is not a multiple of cluster.gpus_per_node={gpn}")
    per_rack = _gpus_per_rack(d, gpu, gpn, sizes)
    nics = read_int(d, "nics_per_node", path, default=gpn)
    nic_gbps = read_number(d, "nic_gbps", path, default=float(specs.get("default_nic_gbps", 400)))
    fabric = str(read_choice(d, "fabric", path))
    topology = str(read_choice(d, "topology", path))
    tiers_given = d.get("tiers") not in (None, AUTO)
    tiers = read_int(d, "tiers", path) if tiers_given else 0
    oversub = read_number(d, "oversubscription", path)
    pod_given = d.get("pod_gpus") is not None
    pod = min(read_int(d, "pod_gpus", path, default=gpus), gpus)
    routing = str(read_choice(d, "routing", path, default=field("cluster.routing").default_for({"fabric": fabric})))
    qps = read_int(d, "qps_per_connection", path, default=field("cluster.qps_per_connection").default_for({"routing": routing}))
    return ClusterSpec(
        gpu=gpu, gpus=gpus, gpus_per_node=gpn, nics_per_node=nics, nic_gbps=nic_gbps, fabric=fabric,
        topology=topology, tiers=tiers, oversubscription=oversub, pod_gpus=pod, routing=routing,
        switch=read_key(d, "switch", path), nic=read_key(d, "nic", path), qps_per_connection=qps, tiers_given=tiers_given,
        pod_given=pod_given,
        in_network_reduction=bool(read_bool(d, "in_network_reduction", path,
                                        default=declared_default("cluster.in_network_reduction"))),
        rank_assignment=str(read_choice(d, "rank_assignment", path)),
        gpus_per_rack=per_rack,
        rack_scale=bool(sizes),
    )


def _gpus_per_rack(d: Mapping[str, Any], gpu: str, gpn: int, sizes: list[int]) -> int | None:
    """``cluster.gpus_per_rack`` (None when not given): GPUs the job uses in each rack-scale NVLink domain, 1 to
    ``gpus_per_node``; refused on HGX servers, which a job uses whole (the catalog's ``node_sizes`` marks a
    rack-scale system)."""
    if d.get("gpus_per_rack") is None:
        return None
    per_rack = int(read_int(d, "gpus_per_rack", "cluster"))
    if not sizes:
        raise ScenarioError("cluster.gpus_per_rack", f"only rack-scale systems (GB200 / GB300 NVL72) leave spares "
                                                     f"in an NVLink domain; {gpu} servers are used whole, so leave "
                                                     "it out")
    if per_rack > gpn:
        raise ScenarioError("cluster.gpus_per_rack", f"{per_rack} exceeds cluster.gpus_per_node={gpn} (the GPUs "
                                                     "in one rack)")
    return per_rack


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
    server = _server(read_key(d, "server", "costs"), c, catalog)
    npr_default = DEFAULT_NODES_PER_RACK
    if server is not None:
        npr_default = int((get_item(server, "server", "costs.server", catalog).get("specs") or {})
                          .get("nodes_per_rack", DEFAULT_NODES_PER_RACK))
    planes = None if d.get("planes") in (None, AUTO) else read_int(d, "planes", "costs")
    return FabricSettings(
        server=server,
        planes=planes,
        nodes_per_rack=read_int(d, "nodes_per_rack", "costs", default=npr_default),
        leaf_placement=str(read_choice(d, "leaf_placement", "costs")),
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
    if c.gpus_per_rack is not None:  # a fleet's clusters are counted in whole nodes (engine.fleet)
        raise ScenarioError("cluster.gpus_per_rack", "is a job's setting (its scenario's cluster section), not a "
                                                     "fleet cluster's: leave it out here")
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
    raw = read_mapping(doc, "scenario")
    check_keys(raw, TOP_KEYS, REQUIRED_TOP, "")
    for key in ("costs", "uncertainty"):
        if raw.get(key) is not None and not isinstance(raw[key], Mapping):
            raise ScenarioError(key, "must be an object", WRONG_TYPE)
    ranges = find_ranges(raw)
    d = likely_scenario(raw, ranges) if ranges else raw
    name = d.get("name", declared_default("name"))
    if not isinstance(name, str):
        raise ScenarioError("name", f"must be a string, got {name!r}", WRONG_TYPE)
    description = d.get("description", declared_default("description"))
    if not isinstance(description, str):
        raise ScenarioError("description", f"must be a string, got {description!r}", WRONG_TYPE)
    model = parse_model(d["model"])
    training = parse_training(d["training"])
    parallelism = parse_parallelism(d["parallelism"])
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
