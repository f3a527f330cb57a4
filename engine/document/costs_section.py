"""The ``costs`` section of a scenario: its keys, bounds and defaults, resolved into :class:`CostParams`.

Called by the parser (:func:`engine.document.parse.parse_scenario`), so ``predict``, ``tco`` and save-time
validation refuse the same bad cost inputs; the Monte Carlo (:mod:`.uncertainty`) calls :func:`resolve_costs`
again with numpy arrays of samples in place of numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import KINDS, Catalog, CatalogError, CatalogItem, get_item, items_of_kind
from engine.errors import ScenarioError
from engine.schema.bounds import check_field, check_number, check_samples
from engine.schema.types import CostParams, FloatLike

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
    """Validate a number, or an array of Monte Carlo samples, against the bounds table (:mod:`.bounds`).

    ``minimum``/``strict`` are the lower bound of :data:`NUMERIC_COSTS` / :data:`GOODPUT_KEYS`, used only for a
    field the bounds table does not list."""
    if isinstance(value, np.ndarray):
        arr = value.astype(float)
        try:
            return np.asarray(check_samples(arr, field), dtype=float)
        except LookupError:
            for v in (float(arr.min()), float(arr.max())) if arr.size else ():
                check_number(v, field, lo=minimum, lo_open=strict)
            return arr
    try:
        return check_field(value, field)
    except LookupError:
        return check_number(value, field, lo=minimum, lo_open=strict)


def cooling_of(server: Mapping[str, Any] | None) -> str:
    """``air`` or ``liquid``: the cooling a server item needs (``specs.cooling``; air when unsaid)."""
    return str(((server or {}).get("specs") or {}).get("cooling", "air"))


def resolve_costs(costs: Mapping[str, Any] | None, catalog: Catalog | None = None,
                  cooling: str = "air") -> CostParams:
    """Validate the ``costs`` section (ranges already replaced by numbers or arrays) and fill defaults.

    ``cooling`` (the server's, :func:`cooling_of`) picks the facility's default PUE when ``costs.pue`` is not
    given: liquid-cooled racks run in liquid-cooled halls with a lower PUE (``pue_by_cooling``)."""
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
    defaults = dict(fspecs)
    by_cooling = fspecs.get("pue_by_cooling") or {}
    if cooling in by_cooling:
        defaults["pue"] = by_cooling[cooling]
    for name, (minimum, strict) in NUMERIC_COSTS.items():
        raw = costs.get(name, defaults.get(name, 0.0))
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
    cat_keys = (catalog if catalog is not None else _all_items()) if prices_raw else {}
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
    out: dict[str, CatalogItem] = {}
    for kind in KINDS:
        out.update(items_of_kind(kind))
    return out
