"""Total cost of ownership of a training cluster and of one training run.

Pure Python + numpy (no Django). ``tco(scenario)`` parses the scenario once (:mod:`engine.document.parse`: the
same checks as ``predict`` and save-time validation; a ScenarioSpec parsed by the caller is not parsed again), predicts
performance on the parsed scenario (or takes the caller's ``predict`` result), prices the fabric sized on its
topology, estimates goodput and prices everything from the catalog and the scenario's ``costs`` section.
The equations live in :mod:`.costing`; ranges, Monte Carlo and sensitivity in :mod:`.uncertainty`.
Equations, defaults and what counts as "network": docs/cost-model.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import CatalogItems
from engine.cost import uncertainty
from engine.cost.costing import (
    CATEGORIES,
    CATEGORY_PREFIX,
    Line,
    annual,
    cost_lines,
    perf_point,
)
from engine.document.costs_section import resolve_costs
from engine.document.parse import parse_scenario
from engine.errors import ScenarioError
from engine.fabric.sizing import FabricPlan
from engine.fabric.topology import fabric_block
from engine.performance.error_bands import figure_intervals, throughput_band
from engine.performance.result import Result
from engine.schema.bounds import check_int
from engine.schema.types import CostParams, FloatLike, ScenarioSpec, Topology


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


def fabric_section(plan: FabricPlan, topology: Topology) -> dict[str, Any]:
    """The ``fabric`` block of a tco result: ``predict``'s fabric block (same keys, same values) plus media,
    ports and power of the plan."""
    d = plan.to_dict()
    out = fabric_block(topology)
    out.update({
        "nic_model": plan.nic_model,
        "leaf_placement": d["leaf_placement"],
        "endpoints": d["endpoints"],
        "ports_used": d["ports_used"],
        "ports_available": d["ports_available"],
        "nics": d["nics"],
        "transceivers": d["transceivers"],
        "cables": d["cables"],
        "network_power_kw": d["network_power_kw"],
        "nic_power_kw": d["nic_power_kw"],
        "power_kw": d["power_kw"],
    })
    return out


def _intervals(s: ScenarioSpec, performance: Mapping[str, Any], tco_out: Mapping[str, Any]) -> dict[str, list[float]]:
    """80% intervals of the headline figures: the performance's, and the run's days and cost, which scale with
    the run's length (engine.performance.error_bands)."""
    if not performance.get("fits") or performance.get("network_wait_fraction") is None:
        return {}
    band = throughput_band({"network_wait_fraction": performance["network_wait_fraction"],
                            "gpus": performance.get("gpus"), "framework": s.training.framework or "auto"})
    out = {k: list(v) for k, v in (performance.get("intervals") or {}).items()}
    out.update(figure_intervals({k: tco_out.get(k) for k in ("run_days", "run_cost_usd", "usd_per_million_tokens")},
                                band))
    return out


def tco(scenario: Mapping[str, Any] | ScenarioSpec, catalog: CatalogItems | None = None, monte_carlo: int = 0,
        sensitivity: bool = False, seed: int = 0, *, performance: Result | None = None) -> dict[str, Any]:
    """Fabric, TCO, goodput and performance of ``scenario``; optional Monte Carlo and tornado sensitivity.

    Numeric inputs in ``costs``, ``cluster`` and ``training`` may be ranges ``{"low", "likely", "high"}``; the
    deterministic figures use ``likely``.

    ``scenario`` is a document, or a :class:`ScenarioSpec` already parsed from one with the same ``catalog``
    (:func:`engine.document.parse.parse_scenario`), which is not parsed again. ``performance``, when given, is
    what :func:`engine.performance.api.predict` returned for that scenario and catalog: it is used instead of
    running the performance model a second time. Monte Carlo and sensitivity vary the document, so they need
    the document itself.
    """
    document = scenario if isinstance(scenario, Mapping) else None
    if document is None and not isinstance(scenario, ScenarioSpec):
        raise ScenarioError("scenario", f"must be an object, got {type(scenario).__name__}")
    monte_carlo = check_int(monte_carlo, "params.monte_carlo")
    seed = check_int(seed, "params.seed")
    if document is None and (monte_carlo > 0 or sensitivity):
        raise ScenarioError("scenario", "Monte Carlo and sensitivity vary the scenario document: give the "
                            "document, not a parsed ScenarioSpec")
    s = parse_scenario(scenario, catalog)  # the one parser: ranges, costs, fabric and layout checks
    ranges = s.ranges
    params = s.cost_params if s.cost_params is not None else resolve_costs(None, catalog)
    point = perf_point(s, catalog, params, performance=performance)
    lines, summary, gp = cost_lines(point, params, catalog)
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
        "fabric": fabric_section(point.plan, s.topo),
        "tco": tco_out,
        "goodput": goodput_out,
        "performance": point.performance,
        "intervals": _intervals(s, point.performance, tco_out),
    }
    if document is not None and monte_carlo > 0:
        out["monte_carlo"] = uncertainty.monte_carlo(document, catalog, samples=monte_carlo, seed=seed,
                                                     ranges=ranges, base_point=point)
    if document is not None and sensitivity:
        out["sensitivity"] = uncertainty.sensitivity(document, catalog, ranges=ranges, base_point=point)
    return out
