"""The cost equations of one configuration: line items, annualisation, goodput and the TCO summary.

Pure Python + numpy. :func:`perf_point` gathers everything about a parsed scenario that is not a price (the
performance prediction, the fabric plan sized on the scenario's topology, the server, reliability); the
equations (:func:`evaluate`) take floats or numpy arrays, so the Monte Carlo in :mod:`.uncertainty` runs the
very same code on 10,000 samples at once. Equations and what counts as "network": docs/cost-model.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.catalog import CatalogError, CatalogItem, CatalogItems, get_item, items_of_kind
from engine.cost.goodput import (
    ReliabilityModel,
    goodput_arrays,
    interruptions_by_component,
    load_reliability,
    param_count,
    part_counts,
)
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.fabric.sizing import FabricPlan, plan_for
from engine.performance.api import predict
from engine.performance.result import Result
from engine.schema.types import CostParams, FloatLike, ScenarioSpec, scenario_to_dict

HOURS_PER_YEAR = 8760.0
CATEGORIES = ("gpu_servers", "network", "power", "facility", "maintenance", "storage", "staff")
CATEGORY_PREFIX = "annual_usd:"


# --------------------------------------------------------------------------------------------- perf point


@dataclass
class PerfPoint:
    """Everything about one (cluster, training) configuration that is not a price."""

    performance: dict[str, Any]
    plan: FabricPlan
    server_key: str
    server_item: CatalogItem
    gpus: int
    nodes: int
    hosts: int  # operating-system hosts (nodes x the server's hosts_per_server)
    gpus_per_node: int
    gpu_tdp_w: float
    host_power_w: float
    server_max_w: float
    time_to_train_days: float
    tokens: float
    network_wait_fraction: float
    params: float
    rate_by_component: dict[str, float]
    reliability: ReliabilityModel
    gpus_used_per_node: int = 0  # GPUs the job uses of each node (cluster.gpus_per_rack); 0 = all of them

    @property
    def spare_gpus(self) -> int:
        """GPUs bought but left idle [GPUs]: whole nodes bought (``nodes`` x ``gpus_per_node``) less the job's."""
        return self.nodes * self.gpus_per_node - self.gpus

    @property
    def base_rate_per_day(self) -> float:
        return sum(self.rate_by_component.values())


def _predict(s: ScenarioSpec, catalog: CatalogItems | None) -> dict[str, Any]:
    return dict(predict(s, catalog).to_dict())


def _no_server_message(s: ScenarioSpec, catalog: CatalogItems | None) -> str:
    gpn, gpu = s.cluster.gpus_per_node, s.cluster.gpu
    servers = items_of_kind("server", catalog).values()
    same_gpu = sorted(f"{v['key']} ({(v.get('specs') or {}).get('gpus_per_server')} GPUs)" for v in servers
                      if (v.get("specs") or {}).get("gpu") == gpu)
    same_size = sorted(f"{v['key']} holds {(v.get('specs') or {}).get('gpu')}" for v in servers
                       if int((v.get("specs") or {}).get("gpus_per_server", 0)) == gpn)
    hint = f"servers for {gpu}: {', '.join(same_gpu)}" if same_gpu else f"no server holds {gpu}"
    if same_size:
        hint += f"; {gpn}-GPU servers: {', '.join(same_size)} (set cluster.gpu to match)"
    return f"cannot price: no server in the catalog holds {gpn} x {gpu} ({hint}); set costs.server"


def perf_point(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None,
               params: CostParams | None = None, *, performance: Result | None = None) -> PerfPoint:
    """Predict performance and size the fabric of a scenario (a document is parsed first: same checks; a parsed
    ScenarioSpec is used as is).

    ``performance``: :func:`engine.performance.api.predict`'s result for this scenario and catalog, when the
    caller already has it (the performance model then does not run again).

    Refuses (ScenarioError naming ``cluster.gpu``, message "does not fit in memory") a run whose layout does not fit in GPU memory:
    such a run cannot be priced.
    """
    s = parse_scenario(scenario, catalog)
    performance_dict = dict(performance.to_dict()) if performance is not None else _predict(s, catalog)
    return _perf_point(s, catalog, performance_dict)


def _perf_point(s: ScenarioSpec, catalog: CatalogItems | None, performance: dict[str, Any]) -> PerfPoint:
    """The :class:`PerfPoint` of a parsed scenario whose ``performance`` (a ``Result.to_dict()``) is known."""
    if not performance.get("fits", True):
        raise ScenarioError(
            "cluster.gpu",
            f"the run does not fit in memory: the layout needs {performance.get('memory_gb_per_gpu', 0.0):.1f} GB "
            f"per GPU but {s.cluster.gpu} has {performance.get('memory_limit_gb', 0.0):.1f} GB usable, so it "
            "cannot be priced (use more GPUs, tensor/pipeline parallelism, ZeRO or recompute)",
        )
    try:
        # the parser sized the fabric once and kept its plan on the topology; size it here only for a scenario
        # built without the parser
        built = s.topology.plan if s.topology is not None else None
        plan = built if isinstance(built, FabricPlan) else plan_for(s, catalog)
        gpu = get_item(s.cluster.gpu, "gpu", "cluster.gpu", catalog)
    except CatalogError as exc:
        raise ScenarioError(exc.field, exc.message) from exc
    fab = s.fabric
    if fab is None or fab.server is None:
        raise ScenarioError("costs.server", _no_server_message(s, catalog))
    server = get_item(fab.server, "server", "costs.server", catalog)
    sspecs = server.get("specs") or {}
    gpn = s.cluster.gpus_per_node
    nodes = s.topo.nodes
    tdp = float((gpu.get("specs") or {}).get("tdp_w") or gpu.get("power_w") or 0.0)
    host = float(sspecs.get("host_power_w", 0.0))
    max_w = float(sspecs.get("max_power_w") or server.get("power_w") or (gpn * tdp + host))
    reliability = load_reliability(catalog)
    # hosts: operating-system instances (an NVL72 rack is 18 compute trays, each its own host): the per-host
    # failure rates (host, software) and the per-host checkpoint write bandwidth count these, not racks
    # (with cluster.gpus_per_rack only the trays holding the job's GPUs: ClusterSpec.used_of_node; the trays of
    # spares neither interrupt the job when they fail nor write its checkpoints)
    hosts = nodes * s.cluster.used_of_node(int(sspecs.get("hosts_per_server", 1)))
    counts = part_counts(s.cluster.gpus, hosts, plan.nics, plan.switches["total"], plan.transceiver_count,
                         plan.cable_count)
    return PerfPoint(
        performance=performance,
        plan=plan,
        server_key=str(server["key"]),
        server_item=server,
        gpus=s.cluster.gpus,
        nodes=nodes,
        hosts=hosts,
        gpus_per_node=gpn,
        gpu_tdp_w=tdp,
        host_power_w=host,
        server_max_w=max_w,
        time_to_train_days=float(performance["time_to_train_days"]),
        tokens=float(s.training.tokens),
        network_wait_fraction=float(performance.get("network_wait_fraction") or 0.0),
        params=param_count(scenario_to_dict(s)["model"]),
        rate_by_component=interruptions_by_component(counts, reliability),
        reliability=reliability,
        gpus_used_per_node=s.cluster.gpus_used_per_node,
    )


def _spares_note(point: PerfPoint) -> str:
    """The server line's note when the job leaves spares in each rack (``cluster.gpus_per_rack``): racks are
    bought whole, so the spares are priced, powered and housed with them."""
    used, gpn = point.gpus_used_per_node, point.gpus_per_node
    if not 0 < used < gpn:
        return ""
    return (f"; {used} of {gpn} GPUs used in each (cluster.gpus_per_rack): {point.nodes * gpn:,} GPUs bought "
            f"for {point.gpus:,} used, {point.spare_gpus:,} spares")


# --------------------------------------------------------------------------------------------- cost equations


@dataclass
class Line:
    category: str  # gpu_servers | network | power | facility | maintenance | storage | staff
    item: str
    quantity: FloatLike
    unit_price_usd: FloatLike
    basis: str  # capex | opex
    group: str  # server | network | other  (for the network share)
    source: str
    life_years: str = "depreciation_years"  # capex: which life amortizes it

    @property
    def total(self) -> FloatLike:
        return self.quantity * self.unit_price_usd


def capital_recovery_factor(rate: FloatLike, years: FloatLike) -> FloatLike:
    """Annual payment per $ of capex: 1/n without cost of capital, else the annuity i/(1-(1+i)^-n)."""
    i = np.asarray(rate, dtype=float)
    n = np.asarray(years, dtype=float)
    safe_i = np.where(i > 0, i, 1.0)
    annuity = safe_i / (1.0 - (1.0 + safe_i) ** (-n))
    crf = np.where(i > 0, annuity, 1.0 / n)
    return float(crf) if crf.ndim == 0 else crf


def _price(key: str, item: CatalogItem, params: CostParams) -> FloatLike:
    if key in params.prices:
        return params.prices[key]
    price = item.get("unit_price_usd")
    if price is None:
        raise ScenarioError(f"costs.prices.{key}", "catalog item has no unit_price_usd; give one in costs.prices")
    return float(price)


def _src(item: CatalogItem, params: CostParams) -> str:
    if item["key"] in params.prices:
        return "costs.prices override"
    return str(item.get("source", ""))


def build_lines(point: PerfPoint, params: CostParams, catalog: CatalogItems | None = None) -> list[Line]:
    """Capex and annual opex line items of one configuration (numbers may be arrays).

    ``group`` splits every line three ways for the shares: ``network`` (cluster-level interconnect: switches,
    transceivers, cables, their installation, power, floor space and maintenance, plus any front-end network),
    ``nic`` (the compute NICs: server components, stacked under gpu_servers) and ``server`` / ``other``.
    """
    v = params.values
    plan = point.plan
    fac_src = str(get_item(params.facility_key, "facility", "costs.facility", catalog).get("source", ""))
    lines: list[Line] = []
    server = point.server_item
    lines.append(Line("gpu_servers", f"{server['name']} ({point.server_key}){_spares_note(point)}", float(point.nodes),
                      _price(point.server_key, server, params), "capex", "server", _src(server, params)))
    lines.append(Line("gpu_servers", f"Compute NIC {plan.nic_item['name']} ({plan.nic_model})", float(plan.nics),
                      _price(plan.nic_model, plan.nic_item, params), "capex", "nic", _src(plan.nic_item, params)))
    lines.append(Line("network", f"Switch {plan.switch_item['name']} ({plan.switch_model})",
                      float(plan.switches["total"]), _price(plan.switch_model, plan.switch_item, params), "capex",
                      "network", _src(plan.switch_item, params)))
    for kind, bucket in (("transceiver", plan.transceivers), ("cable", plan.cables)):
        for key, qty in sorted(bucket.items()):
            item = get_item(key, kind, "cluster.switch", catalog)
            lines.append(Line("network", f"{kind.capitalize()} {item['name']} ({key})", float(qty),
                              _price(key, item, params), "capex", "network", _src(item, params)))
    hw = {g: sum((ln.total for ln in lines if ln.group == g), start=0.0) for g in ("server", "nic", "network")}
    install_src = f"install_share of hardware capex; {fac_src}"
    lines.append(Line("gpu_servers", "Installation and integration (servers)", 1.0, v["install_share"] * hw["server"],
                      "capex", "server", install_src))
    lines.append(Line("gpu_servers", "Installation and integration (compute NICs)", 1.0,
                      v["install_share"] * hw["nic"], "capex", "nic", install_src))
    lines.append(Line("network", "Installation and integration (network)", 1.0, v["install_share"] * hw["network"],
                      "capex", "network", install_src))
    lines.append(Line("network", "Front-end / storage network", 1.0, v["frontend_network_usd"], "capex", "network",
                      "costs.frontend_network_usd"))
    lines.append(Line("storage", "Storage (checkpoints, datasets)", 1.0, v["storage_usd"], "capex", "other",
                      "costs.storage_usd"))

    # power: average IT draw x PUE x hours x $/kWh; NICs and the network run at full power
    nic_kw = plan.nic_power_kw
    server_kw_avg = point.nodes * (point.gpus_per_node * point.gpu_tdp_w + point.host_power_w) / 1000.0 \
        * v["avg_utilization"]
    network_kw = plan.network_power_kw
    energy = v["pue"] * HOURS_PER_YEAR
    lines.append(Line("power", "Electricity, GPU servers (avg IT x PUE, kWh/yr)", server_kw_avg * energy,
                      v["usd_per_kwh"], "opex", "server", fac_src))
    lines.append(Line("power", "Electricity, compute NICs (IT x PUE, kWh/yr)", nic_kw * energy, v["usd_per_kwh"],
                      "opex", "nic", fac_src))
    lines.append(Line("power", "Electricity, network (IT x PUE, kWh/yr)", network_kw * energy, v["usd_per_kwh"],
                      "opex", "network", fac_src))

    # facility: provisioned IT kW (server max power incl. its NICs, plus the network)
    server_kw_prov = max(point.nodes * point.server_max_w / 1000.0 - nic_kw, 0.0)
    if params.facility_mode == "colocation":
        per_kw_year = v["colocation_usd_per_kw_month"] * 12.0
        for group, what, kw in (("server", "GPU servers", server_kw_prov), ("nic", "compute NICs", nic_kw),
                                ("network", "network", network_kw)):
            lines.append(Line("facility", f"Colocation, {what} (provisioned kW x 12 months)", kw, per_kw_year,
                              "opex", group, fac_src))
    else:
        per_kw = v["construction_usd_per_mw"] / 1000.0
        for group, what, kw in (("server", "GPU servers", server_kw_prov), ("nic", "compute NICs", nic_kw),
                                ("network", "network", network_kw)):
            lines.append(Line("facility", f"Data-center construction, {what} (kW critical)", kw, per_kw, "capex",
                              group, fac_src, life_years="facility_life_years"))

    hw_capex = {g: sum((ln.total for ln in lines if ln.basis == "capex" and ln.group == g
                        and ln.category != "facility"), start=0.0) for g in ("server", "nic", "network")}
    for group, what in (("server", "GPU servers"), ("nic", "compute NICs"), ("network", "network")):
        lines.append(Line("maintenance", f"Maintenance and support, {what} (share of capex per year)", 1.0,
                          v["maintenance_share"] * hw_capex[group], "opex", group, fac_src))
    lines.append(Line("staff", "Operations staff", 1.0, v["staff_usd_per_year"], "opex", "other",
                      "costs.staff_usd_per_year"))
    return lines


def annual(line: Line, params: CostParams) -> FloatLike:
    if line.basis == "opex":
        return line.total
    crf = capital_recovery_factor(params.values["cost_of_capital"], params.values[line.life_years])
    return line.total * crf


def goodput_for(point: PerfPoint, params: CostParams) -> dict[str, FloatLike]:
    g = params.goodput
    rel = point.reliability
    rate = g.get("failure_rate_scale", 1.0) * point.base_rate_per_day
    storage = g.get("storage_write_gbytes_per_s", rel.storage_write_gbytes_per_s)
    node_w = g.get("node_write_gbytes_per_s", rel.node_write_gbytes_per_s)
    write = np.minimum(storage, point.hosts * np.asarray(node_w, dtype=float))
    ckpt_bytes = point.params * np.asarray(g.get("checkpoint_bytes_per_param", rel.checkpoint_bytes_per_param))
    return goodput_arrays(rate, ckpt_bytes, write, g.get("restart_min", rel.restart_min),
                          g.get("checkpoint_interval_min"))


def cost_lines(point: PerfPoint, params: CostParams, catalog: CatalogItems | None = None
             ) -> tuple[list[Line], dict[str, FloatLike], dict[str, FloatLike]]:
    """(line items, tco summary, goodput) for one configuration; numbers broadcast over sample arrays."""
    lines = build_lines(point, params, catalog)
    zero: FloatLike = 0.0
    capex = sum((ln.total for ln in lines if ln.basis == "capex"), start=zero)
    net_capex = sum((ln.total for ln in lines if ln.basis == "capex" and ln.group == "network"), start=zero)
    annuals = [(ln, annual(ln, params)) for ln in lines]
    annual_tco = sum((a for _, a in annuals), start=zero)
    net_annual = sum((a for ln, a in annuals if ln.group == "network"), start=zero)
    nic_annual = sum((a for ln, a in annuals if ln.group == "nic"), start=zero)
    server_annual = sum((a for ln, a in annuals if ln.group in ("server", "nic")), start=zero)
    nic_capex = sum((ln.total for ln in lines if ln.basis == "capex" and ln.group == "nic"), start=zero)
    opex = sum((a for ln, a in annuals if ln.basis == "opex"), start=zero)
    gp = goodput_for(point, params)
    frac = np.maximum(np.asarray(gp["effective_training_fraction"], dtype=float), 1e-9)
    run_days = point.time_to_train_days / frac
    run_cost = annual_tco * run_days / 365.0
    hw_amort = sum((a for ln, a in annuals if ln.basis == "capex" and ln.category in ("gpu_servers", "network")),
                   start=zero)
    net_hw_amort = sum((a for ln, a in annuals if ln.basis == "capex" and ln.category == "network"), start=zero)
    energy = sum((a for ln, a in annuals if ln.category == "power"), start=zero)
    net_energy = sum((a for ln, a in annuals if ln.category == "power" and ln.group == "network"), start=zero)
    by_category: dict[str, FloatLike] = {}
    for ln, a in annuals:
        by_category[ln.category] = by_category.get(ln.category, zero) + a
    summary: dict[str, FloatLike] = {
        "capex_usd": capex,
        "capex_per_gpu_usd": capex / point.gpus,
        "network_capex_usd": net_capex,
        "network_share_of_capex": net_capex / capex,
        "annual_opex_usd": opex,
        "annual_tco_usd": annual_tco,
        "network_annual_usd": net_annual,
        "network_share_of_tco": net_annual / annual_tco,
        "network_share_of_hardware_and_energy": (net_hw_amort + net_energy) / (hw_amort + energy),
        "nic_capex_usd": nic_capex,
        "network_incl_nics_share_of_capex": (net_capex + nic_capex) / capex,
        "network_incl_nics_share_of_tco": (net_annual + nic_annual) / annual_tco,
        "usd_per_gpu_hour": annual_tco / (point.gpus * HOURS_PER_YEAR),
        "run_days": run_days,
        "run_cost_usd": run_cost,
        "usd_per_million_tokens": run_cost / (point.tokens / 1e6),
        "stranded_usd_per_year": point.network_wait_fraction * server_annual,
    }
    for cat, a in by_category.items():
        summary[f"{CATEGORY_PREFIX}{cat}"] = a
    return lines, summary, gp
