"""Validate a whole scenario document without running it.

The same checks ``predict``/``tco`` apply before computing — scenario structure and values, ranges
(low <= likely <= high), the ``costs`` section and catalog keys — so the platform can refuse a bad
scenario at save time with the field named, rather than at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulations.engine.catalog import Catalog
from simulations.engine.scenario import ScenarioError, parse_scenario


def validate_scenario(scenario: Mapping[str, Any], catalog: Catalog | None = None) -> None:
    """Raise ScenarioError / CatalogError (both ValueErrors with ``.field``) if ``scenario`` is invalid."""
    from simulations.engine import uncertainty
    from simulations.engine.tco import resolve_costs

    if not isinstance(scenario, Mapping):
        raise ScenarioError("scenario", f"must be an object, got {type(scenario).__name__}")
    ranges = uncertainty.find_ranges(scenario)
    base = uncertainty.likely_scenario(scenario, ranges)
    parse_scenario(base, catalog=catalog)
    resolve_costs(base.get("costs"), catalog)
