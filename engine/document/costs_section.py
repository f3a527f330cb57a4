"""The ``costs`` section of a scenario: its keys, bounds and defaults, resolved into :class:`CostParams`.

Called by the parser (:func:`engine.document.parse.parse_scenario`), so ``predict``, ``tco`` and save-time
validation refuse the same bad cost inputs; the Monte Carlo (:mod:`.uncertainty`) calls :func:`resolve_costs`
again with numpy arrays of samples in place of numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.catalog import KINDS, CatalogError, CatalogItem, CatalogItems, get_item, items_of_kind
from engine.errors import (
    NOT_A_CHOICE,
    OUT_OF_RANGE,
    UNKNOWN_CATALOG_KEY,
    UNKNOWN_KEY,
    WRONG_TYPE,
    ScenarioError,
)
from engine.schema.bounds import check_field, check_samples
from engine.schema.enums import FacilityMode
from engine.schema.fields import field, keys, section_fields
from engine.schema.types import CostParams, FloatLike

DEFAULT_FACILITY = str(field("costs.facility").default)
FACILITY_MODES = FacilityMode.values()

# The section's keys, from the one declaration (engine.schema.fields); every number has its bound in the bounds
# table and may also be a {low, likely, high} range (see engine.document.ranges)
COST_KEYS = keys("costs")
NUMERIC_COSTS = tuple(f.key for f in section_fields("costs") if f.kind == "number")  # in the order resolved
GOODPUT_KEYS = keys("costs.goodput")


def _err(field: str, message: str, code: str | None = None) -> ScenarioError:
    return ScenarioError(field, message, code)


def _check_value(value: Any, field: str) -> FloatLike:
    """Validate a number, or an array of Monte Carlo samples, against the bounds table (:mod:`.bounds`)."""
    if isinstance(value, np.ndarray):
        return np.asarray(check_samples(value.astype(float), field), dtype=float)
    return check_field(value, field)


def cooling_of(server: Mapping[str, Any] | None) -> str:
    """``air`` or ``liquid``: the cooling a server item needs (``specs.cooling``; air when unsaid)."""
    return str(((server or {}).get("specs") or {}).get("cooling", "air"))


def resolve_costs(costs: Mapping[str, Any] | None, catalog: CatalogItems | None = None,
                  cooling: str = "air") -> CostParams:
    """Validate the ``costs`` section (ranges already replaced by numbers or arrays) and fill defaults.

    ``cooling`` (the server's, :func:`cooling_of`) picks the facility's default PUE when ``costs.pue`` is not
    given: liquid-cooled racks run in liquid-cooled halls with a lower PUE (``pue_by_cooling``)."""
    costs = costs or {}
    if not isinstance(costs, Mapping):
        raise _err("costs", "must be an object", WRONG_TYPE)
    for key in costs:
        if key not in COST_KEYS:
            raise _err(f"costs.{key}", f"unknown key; allowed: {', '.join(sorted(COST_KEYS))}", UNKNOWN_KEY)
    fac_key = costs.get("facility", DEFAULT_FACILITY)
    if not isinstance(fac_key, str):
        raise _err("costs.facility", f"must be a catalog key string, got {fac_key!r}", WRONG_TYPE)
    try:
        facility = get_item(fac_key, "facility", "costs.facility", catalog)
    except CatalogError as exc:
        raise _err(exc.field, exc.message, UNKNOWN_CATALOG_KEY) from exc
    fspecs = facility.get("specs") or {}
    values: dict[str, FloatLike] = {}
    defaults = dict(fspecs)
    by_cooling = fspecs.get("pue_by_cooling") or {}
    if cooling in by_cooling:
        defaults["pue"] = by_cooling[cooling]
    for name in NUMERIC_COSTS:
        raw = costs.get(name, defaults.get(name, 0.0))
        values[name] = _check_value(raw, f"costs.{name}")
    util = values["avg_utilization"]
    if np.any(np.asarray(util) > 1.0):
        raise _err("costs.avg_utilization", "must be <= 1 (fraction of max server power)", OUT_OF_RANGE)
    mode = costs.get("facility_mode", fspecs.get("facility_mode", FacilityMode.COLOCATION))
    if mode not in FACILITY_MODES:
        raise _err("costs.facility_mode", f"must be one of {', '.join(FACILITY_MODES)}, got {mode!r}", NOT_A_CHOICE)
    gp_raw = costs.get("goodput") or {}
    if not isinstance(gp_raw, Mapping):
        raise _err("costs.goodput", "must be an object", WRONG_TYPE)
    gp: dict[str, FloatLike] = {}
    for key, value in gp_raw.items():
        if key not in GOODPUT_KEYS:
            raise _err(f"costs.goodput.{key}", f"unknown key; allowed: {', '.join(sorted(GOODPUT_KEYS))}",
                       UNKNOWN_KEY)
        gp[key] = _check_value(value, f"costs.goodput.{key}")
    prices_raw = costs.get("prices") or {}
    if not isinstance(prices_raw, Mapping):
        raise _err("costs.prices", "must be an object of catalog key -> unit price (USD)", WRONG_TYPE)
    cat_keys = (catalog if catalog is not None else _all_items()) if prices_raw else {}
    prices: dict[str, FloatLike] = {}
    for key, value in prices_raw.items():
        if key not in cat_keys:
            raise _err(f"costs.prices.{key}", "unknown catalog key", UNKNOWN_CATALOG_KEY)
        prices[key] = _check_value(value, f"costs.prices.{key}")
    server = costs.get("server")
    if server is not None and not isinstance(server, str):
        raise _err("costs.server", f"must be a catalog key string, got {server!r}", WRONG_TYPE)
    return CostParams(values, gp, prices, str(mode), fac_key, server)


def _all_items() -> dict[str, CatalogItem]:
    out: dict[str, CatalogItem] = {}
    for kind in KINDS:
        out.update(items_of_kind(kind))
    return out
