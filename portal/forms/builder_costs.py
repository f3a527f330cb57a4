"""The scenario builder's ``costs`` and ``uncertainty`` sections: the cost inputs and their ranges written over the
scenario's stored keys the builder does not show (as builder_sections does for the engine sections)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engine.schema.fields import field
from portal.forms.common import COST_FIELDS, RANGE_INPUTS, _range_value

DEFAULT_DISTRIBUTION = field("uncertainty.distribution").default


def costs_section(d: Mapping[str, Any], base: Mapping[str, Any], *, server: Mapping[str, Any] | None,
                  catalog: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``costs``: the scenario's other cost keys kept, the builder's inputs (and their ranges) written.
    ``server``: the catalog server that prices the cluster's GPU (its list price anchors the price range)."""
    costs: dict[str, Any] = copy.deepcopy(dict(base))
    for k in COST_FIELDS:
        if d.get(k) is not None:
            costs[k] = d[k]
    goodput = dict(costs.get("goodput") or {})
    if d.get("failure_rate_scale") is not None and d["failure_rate_scale"] != 1.0:
        goodput["failure_rate_scale"] = d["failure_rate_scale"]
    else:
        goodput.pop("failure_rate_scale", None)
    costs["goodput"] = goodput
    for name, path, default in RANGE_INPUTS:
        likely = d.get(name) if d.get(name) is not None else default
        low, high = d.get(f"{name}_low"), d.get(f"{name}_high")
        node = costs
        for part in path[:-1]:
            node = node[part]
        if likely is not None and (low is not None or high is not None):
            low = likely if low is None else low
            high = likely if high is None else high
            if low < high:
                node[path[-1]] = {"low": low, "likely": likely, "high": high}
    _server_price_range(d, costs, server, catalog)
    if not costs["goodput"]:
        del costs["goodput"]
    return costs


def _server_price_range(d: Mapping[str, Any], costs: dict[str, Any], item: Mapping[str, Any] | None,
                        catalog: Mapping[str, Mapping[str, Any]]) -> None:
    prices = dict(costs.get("prices") or {})
    key: Any = item["key"] if item else None
    for k, v in list(prices.items()):  # a range on another server (the GPU changed) no longer applies
        if isinstance(v, Mapping) and (catalog.get(k) or {}).get("kind") == "server" and k != key:
            del prices[k]
    if item is not None and item.get("unit_price_usd"):
        lo, hi = d.get("server_price_low_pct") or 0.0, d.get("server_price_high_pct") or 0.0
        current = prices.get(key)
        likely = _range_value(current)[1] if current is not None else None
        likely = float(likely if likely is not None else item["unit_price_usd"])
        if lo or hi:
            prices[key] = {"low": round(likely * (1 + lo / 100), 2), "likely": likely,
                           "high": round(likely * (1 + hi / 100), 2)}
        elif isinstance(current, Mapping):  # range cleared: keep only a deliberate price override
            if likely != float(item["unit_price_usd"]):
                prices[key] = likely
            else:
                del prices[key]
    if prices:
        costs["prices"] = prices
    else:
        costs.pop("prices", None)


def uncertainty_section(d: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """``uncertainty``: the stored keys kept; the distribution written unless it is the engine's default."""
    unc = dict(base)
    dist = d.get("distribution") or DEFAULT_DISTRIBUTION
    if dist == DEFAULT_DISTRIBUTION:
        unc.pop("distribution", None)
    else:
        unc["distribution"] = dist
    return unc
