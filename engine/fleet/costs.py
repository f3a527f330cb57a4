"""What each cluster of a plan costs, from the TCO model (:mod:`engine.cost.tco`).

The same line items as ``tco()`` (servers, NICs, switches, optics, cables, installation, power, facility,
maintenance, staff) for a cluster without a training run: capex, annual opex and the annualized TCO
(capex through the capital recovery factor + opex). A cluster costs its annualized TCO for each day it is
in service inside the horizon; a cluster that enters service after day 0 (a purchase) also spends its capex
in the quarter it is delivered (existing clusters' capex is sunk).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from engine.catalog import CatalogError, CatalogItems, get_item
from engine.cost.costing import PerfPoint, annual, build_lines
from engine.cost.goodput import load_reliability
from engine.document.costs_section import resolve_costs
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.fabric.sizing import FabricPlan, plan_for
from engine.fleet.plan import FleetCluster
from engine.schema.types import ScenarioSpec

_CACHE: dict[str, dict[str, float]] = {}
_PLANS: dict[str, tuple[ScenarioSpec, FabricPlan]] = {}
_CACHE_LIMIT = 4096


def catalog_key(catalog: CatalogItems | None) -> str:
    """A content fingerprint of a catalog (``""`` = the engine default), so caches are keyed on what was priced."""
    if catalog is None:
        return ""
    return hashlib.sha256(json.dumps(catalog, sort_keys=True, default=str).encode()).hexdigest()


def _remember(cache: dict[str, Any], key: str, value: Any) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def _repath(exc: ScenarioError | CatalogError, path: str) -> ScenarioError:
    field = exc.field
    if field.startswith("costs"):
        return ScenarioError(f"{path}.{field}", exc.message)
    sub = field.split(".", 1)[-1] if field.startswith("cluster.") else field
    return ScenarioError(f"{path}.{sub}", exc.message)


def cluster_plan(cluster: FleetCluster, costs: Mapping[str, Any] | None, path: str,
                 catalog: CatalogItems | None = None) -> tuple[ScenarioSpec, FabricPlan]:
    """The cluster parsed by the one scenario parser and its fabric sized (switches, optics, cables), cached.

    The scenario parser needs a training section; a one-layer probe model whose layout always exists (pure
    data parallelism, one sequence per GPU) stands in: nothing about it reaches the fabric or the prices.
    """
    key = json.dumps([cluster.doc, dict(costs or {}), catalog_key(catalog)], sort_keys=True, default=str)
    if key in _PLANS:
        return _PLANS[key]
    g = cluster.spec.gpus
    probe = {
        "model": {"layers": 1, "hidden": 64, "heads": 1, "vocab": 64, "seq_len": 64},
        "training": {"global_batch": g, "micro_batch": 1, "tokens": 1e6, "zero": 0, "recompute": "none"},
        "parallelism": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "sequence_parallel": False},
        "cluster": cluster.doc,
    }
    if costs:
        probe["costs"] = dict(costs)
    try:
        s = parse_scenario(probe, catalog)
        fplan = plan_for(s, catalog)
    except (ScenarioError, CatalogError) as exc:
        raise _repath(exc, path) from exc
    _remember(_PLANS, key, (s, fplan))
    return s, fplan


def hosts_per_node(s: ScenarioSpec, catalog: CatalogItems | None = None) -> int:
    """Operating-system hosts per scheduling node: the server's ``hosts_per_server`` (an NVL72 rack is 18 compute
    trays, each its own host), 1 for HGX-style servers or when no server is known."""
    key = s.fabric.server if s.fabric is not None else None
    if key is None:
        return 1
    return int((get_item(key, "server", "costs.server", catalog).get("specs") or {}).get("hosts_per_server", 1))


def cluster_cost(cluster: FleetCluster, plan_costs: Mapping[str, Any] | None, path: str,
                 catalog: CatalogItems | None = None) -> dict[str, float]:
    """``{capex_usd, annual_opex_usd, annual_tco_usd, usd_per_gpu_hour}`` of one cluster (cached)."""
    costs = {**(plan_costs or {}), **(cluster.costs or {})}
    key = json.dumps([cluster.doc, costs, catalog_key(catalog)], sort_keys=True, default=str)
    if key in _CACHE:
        return _CACHE[key]
    s, fplan = cluster_plan(cluster, costs, path, catalog)
    try:
        params = resolve_costs(costs, catalog)
        gpu = get_item(cluster.spec.gpu, "gpu", "cluster.gpu", catalog)
        server_key = s.fabric.server if s.fabric is not None else None
        if server_key is None:
            raise ScenarioError("costs.server", f"no server in the catalog holds {cluster.spec.gpus_per_node} x "
                                f"{cluster.spec.gpu}; set costs.server or plan costs: false")
        server = get_item(server_key, "server", "costs.server", catalog)
    except (ScenarioError, CatalogError) as exc:
        raise _repath(exc, path) from exc
    spec = cluster.spec
    nodes = spec.gpus // spec.gpus_per_node
    sspecs = server.get("specs") or {}
    tdp = float((gpu.get("specs") or {}).get("tdp_w") or gpu.get("power_w") or 0.0)
    host = float(sspecs.get("host_power_w", 0.0))
    point = PerfPoint(
        performance={}, plan=fplan, server_key=str(server["key"]), server_item=server, gpus=spec.gpus,
        nodes=nodes, hosts=nodes * hosts_per_node(s, catalog), gpus_per_node=spec.gpus_per_node, gpu_tdp_w=tdp,
        host_power_w=host,
        server_max_w=float(sspecs.get("max_power_w") or server.get("power_w") or (spec.gpus_per_node * tdp + host)),
        time_to_train_days=0.0, tokens=0.0, network_wait_fraction=0.0, params=0.0, rate_by_component={},
        reliability=load_reliability(catalog),
    )
    lines = build_lines(point, params, catalog)
    capex = float(sum(float(ln.total) for ln in lines if ln.basis == "capex"))
    opex = float(sum(float(annual(ln, params)) for ln in lines if ln.basis == "opex"))
    tco = float(sum(float(annual(ln, params)) for ln in lines))
    out = {"capex_usd": capex, "annual_opex_usd": opex, "annual_tco_usd": tco,
           "usd_per_gpu_hour": tco / (spec.gpus * 8760.0)}
    _remember(_CACHE, key, out)
    return out


def horizon_cost(cluster: FleetCluster, cost: Mapping[str, float], horizon: float) -> float:
    """Annualized TCO for the days the cluster is in service inside the horizon."""
    days = max(min(cluster.retire_day, horizon) - cluster.in_service_day, 0.0)
    return float(cost["annual_tco_usd"]) * days / 365.0
