"""Ranges, Monte Carlo and one-at-a-time (tornado) sensitivity for :func:`engine.cost.tco.tco`.

Any number under ``costs``, ``cluster`` or ``training`` may be written as a range::

    {"low": 0.06, "likely": 0.08, "high": 0.12, "dist": "pert"}     # dist optional: triangular (default) | pert

``likely`` defaults to the midpoint. The deterministic result uses ``likely``.

Monte Carlo (vectorized)
------------------------
* Cost inputs (everything under ``costs``: prices, energy, facility, finance, goodput) are drawn as numpy arrays
  and pushed through the same cost and goodput equations as the deterministic path, in one pass.
* Performance-affecting inputs (``cluster.*``, ``training.*``) need :func:`predict` and fabric sizing, which are
  scalar. Each such input is discretised into ``m`` equal-probability bins (by rank of its samples); every bin is
  represented by the median of its samples (rounded for integer inputs) and the pipeline runs once per distinct
  combination of bins that occurs (at most ``bounds.MAX_PERF_POINTS``; ``m`` shrinks as the number of such inputs grows).
  Samples are then grouped by combination and priced vectorized. With no performance ranges, predict runs once.

Sensitivity: each ranged input (explicit ranges, plus catalog default ranges for the main prices and facility
figures the scenario does not pin) is set to its low and high value with all others at ``likely``; the run cost
(``$ per run``) swing ranks them, largest first (tornado order).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.budget import checkpoint
from engine.catalog import CatalogItems, get_item, items_of_kind
from engine.cost.costing import cost_lines, perf_point
from engine.document.costs_section import cooling_of, resolve_costs
from engine.document.parse import parse_scenario
from engine.document.ranges import (
    find_ranges,
    likely_scenario,
    set_path,
)
from engine.fabric.parts import FabricError, switch_radix
from engine.schema import bounds
from engine.schema.bounds import MAX_SENSITIVITY_INPUTS, check_int, check_work
from engine.schema.types import CostParams, Range, ScenarioSpec
from engine.units import Arr


def sample_range(r: Range, n: int, rng: np.random.Generator) -> Arr:
    """``n`` draws from a triangular or PERT distribution over [low, high] with mode ``likely``."""
    if r.high <= r.low:
        return np.full(n, r.low)
    if r.dist == "pert":
        span = r.high - r.low
        a = 1.0 + 4.0 * (r.likely - r.low) / span
        b = 1.0 + 4.0 * (r.high - r.likely) / span
        return r.low + span * rng.beta(a, b, size=n)
    return rng.triangular(r.low, r.likely, r.high, size=n)


def _percentiles(x: Arr) -> dict[str, float]:
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return {"p10": float(p10), "p50": float(p50), "p90": float(p90), "mean": float(np.mean(x))}


def _subset(params: Any, idx: npt.NDArray[np.intp], n: int) -> Any:
    def cut(d: Mapping[str, Any]) -> dict[str, Any]:
        return {k: (v[idx] if isinstance(v, np.ndarray) and v.shape == (n,) else v) for k, v in d.items()}

    return CostParams(cut(params.values), cut(params.goodput), cut(params.prices), params.facility_mode,
                      params.facility_key, params.server_key)


def monte_carlo(scenario: Mapping[str, Any], catalog: CatalogItems | None = None, samples: int = 10000, seed: int = 0,
                ranges: Mapping[str, Range] | None = None, base_point: Any = None,
                include_defaults: bool = True) -> dict[str, Any]:
    """P10/P50/P90 of wall-clock time to train, annual TCO and $ per run over ``samples`` draws.

    The draws cover the scenario's own ranges and, unless ``include_defaults`` is false, the catalog default
    ranges (``default_ranges``) of every price and facility/goodput figure the scenario does not pin: the same
    inputs the tornado (``sensitivity``) swings, so the band and the tornado never disagree about what is
    uncertain. ``sources`` says where each input's range came from.
    """
    samples = check_int(samples, "params.monte_carlo", lo=1)
    explicit = find_ranges(scenario) if ranges is None else ranges
    base = likely_scenario(scenario, explicit)
    ranges = dict(explicit)
    sources = dict.fromkeys(explicit, "scenario range")
    if include_defaults:
        if base_point is None:
            base_point = _base_point(base, catalog)
        for name, r in default_ranges(base, base_point, catalog).items():
            if name not in ranges:
                ranges[name] = r
                sources[name] = "catalog default range"
    rng = np.random.default_rng(seed)
    draws = {name: sample_range(ranges[name], samples, rng) for name in sorted(ranges)}

    cost_doc = copy.deepcopy(dict(base.get("costs") or {}))
    for name, r in ranges.items():
        if not r.affects_performance:
            set_path(cost_doc, r.path[1:], draws[name])
    parsed = parse_scenario(base, catalog) if base_point is None else None  # parsed once, here or by the caller
    params = resolve_costs(cost_doc, catalog, cooling=_cooling(parsed, catalog, base_point))

    perf_ranges = [ranges[n] for n in sorted(ranges) if ranges[n].affects_performance]
    if perf_ranges:
        base_point = base_point if base_point is not None else perf_point(parsed or base, catalog, params)
    rates = line_rates(catalog)
    out_keys = ("run_days", "annual_tco_usd", "run_cost_usd", "usd_per_gpu_hour", "network_share_of_tco")
    outputs = {k: np.empty(samples) for k in out_keys}
    points = 0
    if not perf_ranges:
        point = base_point if base_point is not None else perf_point(parsed or base, catalog, params)
        _, summary, _ = cost_lines(point, params, catalog)
        for k in out_keys:
            outputs[k][:] = summary[k]
        points = 1
    else:
        dims = len(perf_ranges)
        bins = max(2, math.floor(bounds.MAX_PERF_POINTS ** (1.0 / dims) + 1e-9))
        bin_idx = np.empty((samples, dims), dtype=np.intp)
        reps: list[list[float | int]] = []
        for j, r in enumerate(perf_ranges):
            x = draws[r.field]
            rank = np.argsort(np.argsort(x, kind="stable"), kind="stable")
            b = (rank * bins) // samples
            bin_idx[:, j] = b
            reps.append([_point_value(r, float(np.median(x[b == i])) if np.any(b == i) else r.likely, rates)
                         for i in range(bins)])
        combos, inverse = np.unique(bin_idx, axis=0, return_inverse=True)
        inverse = np.asarray(inverse).reshape(-1)
        cache: dict[tuple[float | int, ...], Any] = {}
        for c, combo in enumerate(combos):
            checkpoint()
            values = tuple(reps[j][int(combo[j])] for j in range(dims))
            if values not in cache:
                doc = copy.deepcopy(base)
                for r, v in zip(perf_ranges, values, strict=True):
                    set_path(doc, r.path, v)
                pin_hardware(doc, base_point)
                cache[values] = perf_point(doc, catalog, params)
            idx = np.nonzero(inverse == c)[0]
            _, summary, _ = cost_lines(cache[values], _subset(params, idx, samples), catalog)
            for k in out_keys:
                outputs[k][idx] = summary[k]
        points = len(cache)
    return {
        "samples": samples,
        "seed": seed,
        "inputs": sorted(ranges),
        "sources": {name: sources[name] for name in sorted(ranges)},
        "performance_points": points,
        "time_to_train_days": _percentiles(outputs["run_days"]),
        "annual_tco_usd": _percentiles(outputs["annual_tco_usd"]),
        "run_cost_usd": _percentiles(outputs["run_cost_usd"]),
        "usd_per_gpu_hour": _percentiles(outputs["usd_per_gpu_hour"]),
        "network_share_of_tco": _percentiles(outputs["network_share_of_tco"]),
    }


# A ranged NIC rate is a choice of line rate: NICs and switch ports come in discrete speeds (100/200/400/800 Gb/s),
# so each performance point snaps to the nearest rate the catalog offers, and keeps the likely scenario's NIC and
# switch only when they can run at it (pin_hardware) — never an impossible 402 Gb/s, never 800 Gb/s on a 400G NIC.
LINE_RATE_FIELDS = ("cluster.nic_gbps",)


def line_rates(catalog: CatalogItems | None = None) -> list[float]:
    """Line rates (Gb/s) links can run at: the catalog's NIC speeds and switch port / breakout speeds, ascending
    (200/400/800 NICs, 100G HDR100 breakout on 200G switches)."""
    rates = {float((item.get("specs") or {}).get("gbps") or 0.0) for item in items_of_kind("nic", catalog).values()}
    for item in items_of_kind("switch", catalog).values():
        specs = item.get("specs") or {}
        rates.update(float(g) for g in (specs.get("breakout") or {}))
        rates.add(float(specs.get("port_gbps") or 0.0))
    return sorted(r for r in rates if r > 0)


def _point_value(r: Range, x: float, rates: list[float]) -> float | int:
    """The value a performance point uses for ``r`` at ``x`` (line rates snapped to the nearest NIC speed)."""
    if r.field in LINE_RATE_FIELDS and rates:
        x = min(rates, key=lambda g: (abs(g - x), -g))
    return r.value(x)


def _cooling(s: ScenarioSpec | None, catalog: CatalogItems | None, point: Any = None) -> str:
    """The cooling of the scenario's server (the base point's when given, else the parsed scenario's)."""
    if point is not None:
        return cooling_of(point.server_item)
    assert s is not None, "the cooling needs a parsed scenario or a base point"
    return cooling_of(get_item(s.fabric.server, "server", "costs.server", catalog)) if s.fabric and s.fabric.server \
        else "air"


def _base_point(base: Mapping[str, Any], catalog: CatalogItems | None) -> Any:
    """The performance point of the likely document ``base``, parsed once (its cooling picks the PUE)."""
    s = parse_scenario(base, catalog)
    return perf_point(s, catalog, resolve_costs(base.get("costs"), catalog, cooling=_cooling(s, catalog)))


def pin_hardware(doc: dict[str, Any], point: Any) -> None:
    """Keep the likely scenario's switch and NIC models while performance inputs vary, as far as they can carry
    the point's NIC line rate; a rate they cannot carry takes the default NIC / switch for that speed."""
    cluster = doc.setdefault("cluster", {})
    rate = cluster.get("nic_gbps", point.plan.spec.nic_gbps)
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        return
    try:
        switch_radix(point.plan.switch_item, float(rate))
        cluster.setdefault("switch", point.plan.switch_model)
    except FabricError:
        pass
    if float((point.plan.nic_item.get("specs") or {}).get("gbps", 0.0)) >= float(rate):
        cluster.setdefault("nic", point.plan.nic_model)


def default_ranges(scenario: Mapping[str, Any], base_point: Any, catalog: CatalogItems | None = None) -> dict[str, Range]:
    """Catalog default ranges for the main prices and facility/goodput figures the scenario does not pin."""
    out: dict[str, Range] = {}
    costs = scenario.get("costs") or {}
    prices = costs.get("prices") or {}

    def add(path: tuple[str, ...], low: float, likely: float, high: float, integer: bool = False) -> None:
        lo, hi = min(low, likely), max(high, likely)
        if hi > lo:
            out[".".join(path)] = Range(path, lo, likely, hi, "triangular", integer)

    plan = base_point.plan
    for key, kind in ((base_point.server_key, "server"), (plan.switch_model, "switch"), (plan.nic_model, "nic")):
        if key in prices:
            continue
        item = get_item(key, kind, "costs.prices", catalog)
        rng = (item.get("specs") or {}).get("price_range_usd")
        price = item.get("unit_price_usd")
        if rng and price is not None:
            add(("costs", "prices", key), float(rng[0]), float(price), float(rng[1]))
    if base_point.plan.transceivers:
        key = max(base_point.plan.transceivers, key=lambda k: base_point.plan.transceivers[k])
        if key not in prices:
            price = float(get_item(key, "transceiver", "costs.prices", catalog).get("unit_price_usd") or 0.0)
            add(("costs", "prices", key), 0.75 * price, price, 1.25 * price)
    fac_key = str(costs.get("facility", "FACILITY-DEFAULT"))
    fspecs = get_item(fac_key, "facility", "costs.facility", catalog).get("specs") or {}
    mode = costs.get("facility_mode", fspecs.get("facility_mode", "colocation"))
    wanted = ["usd_per_kwh", "pue", "depreciation_years",
              "colocation_usd_per_kw_month" if mode == "colocation" else "construction_usd_per_mw"]
    for name in wanted:
        spec_range = (fspecs.get("ranges") or {}).get(name)
        if name in costs or not spec_range:
            continue
        if name == "pue" and cooling_of(base_point.server_item) == "liquid":
            spec_range = (fspecs.get("ranges") or {}).get("pue_liquid") or spec_range
            likely = float((fspecs.get("pue_by_cooling") or {}).get("liquid", spec_range[1]))
        else:
            likely = float(fspecs.get(name, spec_range[1]))
        add(("costs", name), float(spec_range[0]), likely, float(spec_range[2]),
            integer=name == "depreciation_years")
    goodput = costs.get("goodput") or {}
    if "restart_min" not in goodput:
        r = base_point.reliability.restart_min
        add(("costs", "goodput", "restart_min"), r / 2.0, r, r * 3.0)
    if "failure_rate_scale" not in goodput:
        add(("costs", "goodput", "failure_rate_scale"), 0.5, 1.0, 2.0)
    return out


def sensitivity(scenario: Mapping[str, Any], catalog: CatalogItems | None = None,
                ranges: Mapping[str, Range] | None = None, base_point: Any = None) -> list[dict[str, Any]]:
    """One-at-a-time swings of $ per run, largest first."""
    ranges = find_ranges(scenario) if ranges is None else ranges
    base = likely_scenario(scenario, ranges)
    parsed = parse_scenario(base, catalog) if base_point is None else None  # parsed once, here or by the caller
    cooling = _cooling(parsed, catalog, base_point)
    base_params = resolve_costs(base.get("costs"), catalog, cooling=cooling)
    point = base_point if base_point is not None else perf_point(parsed or base, catalog, base_params)
    rates = line_rates(catalog)
    inputs: dict[str, tuple[Range, str]] = {n: (r, "scenario") for n, r in ranges.items()}
    for n, r in default_ranges(base, point, catalog).items():
        if n not in inputs:
            inputs[n] = (r, "catalog default range")

    def run_cost(r: Range, value: float | int) -> float:
        doc = copy.deepcopy(base)
        set_path(doc, r.path, value)
        if r.affects_performance:
            pin_hardware(doc, point)
        params = resolve_costs(doc.get("costs"), catalog, cooling=cooling)
        pt = perf_point(doc, catalog, params) if r.affects_performance else point
        _, summary, _ = cost_lines(pt, params, catalog)
        return float(np.asarray(summary["run_cost_usd"]))

    rows: list[dict[str, Any]] = []
    check_work("sensitivity inputs", len(inputs), MAX_SENSITIVITY_INPUTS, "scenario",
               hint="pin some inputs to single values")
    for name, (r, origin) in inputs.items():
        checkpoint()
        lo_v, hi_v = _point_value(r, r.low, rates), _point_value(r, r.high, rates)
        lo_c, hi_c = run_cost(r, lo_v), run_cost(r, hi_v)
        rows.append({
            "input": name,
            "low_value": lo_v,
            "likely_value": r.value(r.likely),
            "high_value": hi_v,
            "run_cost_low_usd": lo_c,
            "run_cost_high_usd": hi_c,
            "swing_usd": abs(hi_c - lo_c),
            "range_source": origin,
        })
    rows.sort(key=lambda row: (-row["swing_usd"], row["input"]))
    return rows
