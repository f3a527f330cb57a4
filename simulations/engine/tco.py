"""Total cost of ownership of a training cluster and of one training run.

Pure Python + numpy (no Django). ``tco(scenario)`` sizes the fabric (:mod:`.fabric`), predicts performance
(:func:`simulations.engine.perf.predict`), estimates goodput (:mod:`.goodput`) and prices everything from the
catalog and the scenario's ``costs`` section. The cost equations (:func:`evaluate`) take floats or numpy arrays,
so the Monte Carlo in :mod:`.uncertainty` runs the very same code on 10,000 samples at once.
Equations, defaults and what counts as "network": docs/cost-model.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from simulations.engine.catalog import Catalog, CatalogError, CatalogItem, get_item, items_of_kind
from simulations.engine.fabric import DEFAULT_SERVER_FOR_GPU, FabricPlan, size_fabric, spec_from_scenario
from simulations.engine.goodput import (
    ReliabilityModel,
    goodput_arrays,
    interruptions_by_component,
    load_reliability,
    param_count,
    part_counts,
)
from simulations.engine.scenario import ScenarioError

FloatLike = float | npt.NDArray[np.float64]

HOURS_PER_YEAR = 8760.0
CATEGORIES = ("gpu_servers", "network", "power", "facility", "maintenance", "storage", "staff")
CATEGORY_PREFIX = "annual_usd:"
DEFAULT_FACILITY = "FACILITY-DEFAULT"
FACILITY_MODES = ("colocation", "owned")

# costs.<name>: (minimum, strict) — every one may also be a {low, likely, high} range (see uncertainty.py)
NUMERIC_COSTS: dict[str, tuple[float, bool]] = {
    "usd_per_kwh": (0.0, False),
    "pue": (1.0, False),
    "colocation_usd_per_kw_month": (0.0, False),
    "construction_usd_per_mw": (0.0, False),
    "facility_life_years": (0.0, True),
    "depreciation_years": (0.0, True),
    "cost_of_capital": (0.0, False),
    "maintenance_share": (0.0, False),
    "install_share": (0.0, False),
    "avg_utilization": (0.0, True),
    "staff_usd_per_year": (0.0, False),
    "storage_usd": (0.0, False),
    "frontend_network_usd": (0.0, False),
}
GOODPUT_KEYS: dict[str, tuple[float, bool]] = {
    "failure_rate_scale": (0.0, False),
    "restart_min": (0.0, False),
    "checkpoint_bytes_per_param": (0.0, True),
    "storage_write_gbytes_per_s": (0.0, True),
    "node_write_gbytes_per_s": (0.0, True),
    "checkpoint_interval_min": (0.0, True),
}
OTHER_COST_KEYS = {"facility", "facility_mode", "server", "prices", "goodput", "planes", "nodes_per_rack",
                   "leaf_placement"}
COST_KEYS = set(NUMERIC_COSTS) | OTHER_COST_KEYS


def _err(field: str, message: str) -> ScenarioError:
    return ScenarioError(field, message)


def _check_value(value: Any, field: str, minimum: float, strict: bool) -> FloatLike:
    """Validate a number or an array of samples (Monte Carlo) against ``minimum``."""
    if isinstance(value, np.ndarray):
        arr = value.astype(float)
        if not np.all(np.isfinite(arr)):
            raise _err(field, "must be finite")
        bad = arr <= minimum if strict else arr < minimum
        if np.any(bad):
            raise _err(field, f"must be {'>' if strict else '>='} {minimum:g}, got {float(arr[bad][0]):g}")
        return arr
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(field, f"must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise _err(field, f"must be finite, got {v}")
    if (strict and v <= minimum) or (not strict and v < minimum):
        raise _err(field, f"must be {'>' if strict else '>='} {minimum:g}, got {v:g}")
    return v


@dataclass
class CostParams:
    """Resolved cost inputs; each number may be a numpy array of Monte Carlo samples."""

    values: dict[str, FloatLike]
    goodput: dict[str, FloatLike]
    prices: dict[str, FloatLike]  # catalog key -> unit price override
    facility_mode: str
    facility_key: str
    server_key: str | None


def resolve_costs(costs: Mapping[str, Any] | None, catalog: Catalog | None = None) -> CostParams:
    """Validate the ``costs`` section (ranges already replaced by numbers or arrays) and fill defaults."""
    costs = costs or {}
    if not isinstance(costs, Mapping):
        raise _err("costs", "must be an object")
    for key in costs:
        if key not in COST_KEYS:
            raise _err(f"costs.{key}", f"unknown key; allowed: {', '.join(sorted(COST_KEYS))}")
    fac_key = costs.get("facility", DEFAULT_FACILITY)
    if not isinstance(fac_key, str):
        raise _err("costs.facility", f"must be a catalog key string, got {fac_key!r}")
    try:
        facility = get_item(fac_key, "facility", "costs.facility", catalog)
    except CatalogError as exc:
        raise _err(exc.field, exc.message) from exc
    fspecs = facility.get("specs") or {}
    values: dict[str, FloatLike] = {}
    for name, (minimum, strict) in NUMERIC_COSTS.items():
        raw = costs.get(name, fspecs.get(name, 0.0))
        values[name] = _check_value(raw, f"costs.{name}", minimum, strict)
    util = values["avg_utilization"]
    if np.any(np.asarray(util) > 1.0):
        raise _err("costs.avg_utilization", "must be <= 1 (fraction of max server power)")
    mode = costs.get("facility_mode", fspecs.get("facility_mode", "colocation"))
    if mode not in FACILITY_MODES:
        raise _err("costs.facility_mode", f"must be one of {', '.join(FACILITY_MODES)}, got {mode!r}")
    gp_raw = costs.get("goodput") or {}
    if not isinstance(gp_raw, Mapping):
        raise _err("costs.goodput", "must be an object")
    gp: dict[str, FloatLike] = {}
    for key, value in gp_raw.items():
        if key not in GOODPUT_KEYS:
            raise _err(f"costs.goodput.{key}", f"unknown key; allowed: {', '.join(sorted(GOODPUT_KEYS))}")
        minimum, strict = GOODPUT_KEYS[key]
        gp[key] = _check_value(value, f"costs.goodput.{key}", minimum, strict)
    prices_raw = costs.get("prices") or {}
    if not isinstance(prices_raw, Mapping):
        raise _err("costs.prices", "must be an object of catalog key -> unit price (USD)")
    cat_keys = catalog if catalog is not None else _all_items()
    prices: dict[str, FloatLike] = {}
    for key, value in prices_raw.items():
        if key not in cat_keys:
            raise _err(f"costs.prices.{key}", "unknown catalog key")
        prices[key] = _check_value(value, f"costs.prices.{key}", 0.0, False)
    server = costs.get("server")
    if server is not None and not isinstance(server, str):
        raise _err("costs.server", f"must be a catalog key string, got {server!r}")
    return CostParams(values, gp, prices, str(mode), fac_key, server)


def _all_items() -> dict[str, CatalogItem]:
    from simulations.engine.catalog import KINDS

    out: dict[str, CatalogItem] = {}
    for kind in KINDS:
        out.update(items_of_kind(kind))
    return out


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

    @property
    def base_rate_per_day(self) -> float:
        return sum(self.rate_by_component.values())


def _server_for(gpu_key: str, server_key: str | None, gpus_per_node: int, catalog: Catalog | None) -> CatalogItem:
    key = server_key
    if key is None:
        key = DEFAULT_SERVER_FOR_GPU.get(gpu_key)
        if key is None:
            matches = [k for k, v in items_of_kind("server", catalog).items()
                       if (v.get("specs") or {}).get("gpu") == gpu_key]
            if not matches:
                raise _err("costs.server", f"no server in the catalog for GPU {gpu_key!r}; set costs.server")
            key = sorted(matches)[0]
    try:
        item = get_item(key, "server", "costs.server", catalog)
    except CatalogError as exc:
        raise _err(exc.field, exc.message) from exc
    specs = item.get("specs") or {}
    if specs.get("gpu") != gpu_key:
        raise _err("costs.server", f"server {key} holds {specs.get('gpu')}, not cluster.gpu={gpu_key}")
    if int(specs.get("gpus_per_server", gpus_per_node)) != gpus_per_node:
        raise _err("cluster.gpus_per_node", f"{gpus_per_node} does not match server {key} "
                                            f"({specs.get('gpus_per_server')} GPUs)")
    return item


def _predict(scenario: Mapping[str, Any], catalog: Catalog | None) -> dict[str, Any]:
    from simulations.engine.perf import predict

    result = predict(scenario, catalog)
    return dict(result.to_dict())


def perf_point(scenario: Mapping[str, Any], catalog: Catalog | None = None,
               params: CostParams | None = None) -> PerfPoint:
    """Predict performance and size the fabric of a scenario whose numbers are all resolved."""
    performance = _predict(scenario, catalog)
    try:
        spec = spec_from_scenario(scenario, catalog)
        plan = size_fabric(spec, catalog)
    except CatalogError as exc:
        raise _err(exc.field, exc.message) from exc
    cluster = scenario["cluster"]
    gpu_key = str(cluster["gpu"])
    gpu = get_item(gpu_key, "gpu", "cluster.gpu", catalog)
    server_key = params.server_key if params is not None else (scenario.get("costs") or {}).get("server")
    server = _server_for(gpu_key, server_key, spec.gpus_per_node, catalog)
    sspecs = server.get("specs") or {}
    tdp = float((gpu.get("specs") or {}).get("tdp_w") or gpu.get("power_w") or 0.0)
    host = float(sspecs.get("host_power_w", 0.0))
    max_w = float(sspecs.get("max_power_w") or server.get("power_w") or (spec.gpus_per_node * tdp + host))
    reliability = load_reliability(catalog)
    counts = part_counts(spec.gpus, spec.nodes, plan.nics, plan.switches["total"], plan.transceiver_count,
                         plan.cable_count)
    tokens = float(scenario["training"]["tokens"])
    return PerfPoint(
        performance=performance,
        plan=plan,
        server_key=str(server["key"]),
        server_item=server,
        gpus=spec.gpus,
        nodes=spec.nodes,
        gpus_per_node=spec.gpus_per_node,
        gpu_tdp_w=tdp,
        host_power_w=host,
        server_max_w=max_w,
        time_to_train_days=float(performance["time_to_train_days"]),
        tokens=tokens,
        network_wait_fraction=float(performance.get("network_wait_fraction") or 0.0),
        params=param_count(scenario["model"]),
        rate_by_component=interruptions_by_component(counts, reliability),
        reliability=reliability,
    )


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
        raise _err(f"costs.prices.{key}", "catalog item has no unit_price_usd; give one in costs.prices")
    return float(price)


def _src(item: CatalogItem, params: CostParams) -> str:
    if item["key"] in params.prices:
        return "costs.prices override"
    return str(item.get("source", ""))


def build_lines(point: PerfPoint, params: CostParams, catalog: Catalog | None = None) -> list[Line]:
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
    lines.append(Line("gpu_servers", f"{server['name']} ({point.server_key})", float(point.nodes),
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
    write = np.minimum(storage, point.nodes * np.asarray(node_w, dtype=float))
    ckpt_bytes = point.params * np.asarray(g.get("checkpoint_bytes_per_param", rel.checkpoint_bytes_per_param))
    return goodput_arrays(rate, ckpt_bytes, write, g.get("restart_min", rel.restart_min),
                          g.get("checkpoint_interval_min"))


def evaluate(point: PerfPoint, params: CostParams, catalog: Catalog | None = None
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


def _f(x: FloatLike) -> float:
    return float(np.asarray(x))


def _line_dict(ln: Line, params: CostParams) -> dict[str, Any]:
    return {
        "category": ln.category,
        "item": ln.item,
        "quantity": _f(ln.quantity),
        "unit_price_usd": _f(ln.unit_price_usd),
        "total_usd": _f(ln.total),
        "basis": ln.basis,
        "annual_usd": _f(annual(ln, params)),
        "network": ln.group == "network",
        "source": ln.source,
    }


def fabric_section(plan: FabricPlan) -> dict[str, Any]:
    d = plan.to_dict()
    return {
        "switches": d["switches"],
        "switch_model": plan.switch_model,
        "nic_model": plan.nic_model,
        "fabric": d["fabric"],
        "topology": d["topology"],
        "tiers": d["tiers"],
        "planes": d["planes"],
        "radix": d["radix"],
        "link_gbps": d["link_gbps"],
        "leaf_placement": d["leaf_placement"],
        "endpoints": d["endpoints"],
        "max_gpus": d["max_gpus"],
        "links": d["links"],
        "ports_used": d["ports_used"],
        "ports_available": d["ports_available"],
        "nics": d["nics"],
        "transceivers": d["transceivers"],
        "cables": d["cables"],
        "network_power_kw": d["network_power_kw"],
        "nic_power_kw": d["nic_power_kw"],
        "power_kw": d["power_kw"],
    }


def tco(scenario: Mapping[str, Any], catalog: Catalog | None = None, monte_carlo: int = 0,
        sensitivity: bool = False, seed: int = 0) -> dict[str, Any]:
    """Fabric, TCO, goodput and performance of ``scenario``; optional Monte Carlo and tornado sensitivity.

    Numeric inputs in ``costs``, ``cluster`` and ``training`` may be ranges ``{"low", "likely", "high"}``; the
    deterministic figures use ``likely``.
    """
    from simulations.engine import uncertainty

    if not isinstance(scenario, Mapping):
        raise _err("scenario", f"must be an object, got {type(scenario).__name__}")
    if isinstance(monte_carlo, bool) or not isinstance(monte_carlo, int) or monte_carlo < 0:
        raise _err("monte_carlo", f"must be a non-negative integer, got {monte_carlo!r}")
    ranges = uncertainty.find_ranges(scenario)
    base = uncertainty.likely_scenario(scenario, ranges)
    params = resolve_costs(base.get("costs"), catalog)
    point = perf_point(base, catalog, params)
    lines, summary, gp = evaluate(point, params, catalog)
    tco_out: dict[str, Any] = {k: _f(v) for k, v in summary.items() if not k.startswith(CATEGORY_PREFIX)}
    tco_out["annual_by_category_usd"] = {c: _f(summary.get(f"{CATEGORY_PREFIX}{c}", 0.0)) for c in CATEGORIES}
    tco_out["line_items"] = [_line_dict(ln, params) for ln in lines if _f(ln.total) != 0.0]
    tco_out["facility_mode"] = params.facility_mode
    tco_out["server_model"] = point.server_key
    goodput_out: dict[str, Any] = {k: _f(v) for k, v in gp.items()}
    scale = _f(params.goodput.get("failure_rate_scale", 1.0))
    goodput_out["interruptions_by_component_per_day"] = {k: scale * r for k, r in point.rate_by_component.items()}
    goodput_out["checkpoint_gb"] = _f(point.params * np.asarray(
        params.goodput.get("checkpoint_bytes_per_param", point.reliability.checkpoint_bytes_per_param))) / 1e9
    out: dict[str, Any] = {
        "fabric": fabric_section(point.plan),
        "tco": tco_out,
        "goodput": goodput_out,
        "performance": point.performance,
    }
    if monte_carlo > 0:
        out["monte_carlo"] = uncertainty.monte_carlo(scenario, catalog, samples=monte_carlo, seed=seed,
                                                     ranges=ranges, base_point=point)
    if sensitivity:
        out["sensitivity"] = uncertainty.sensitivity(scenario, catalog, ranges=ranges, base_point=point)
    return out
