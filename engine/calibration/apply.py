"""Predictions with a fleet's calibration profile applied.

``predict_calibrated(scenario, profile)`` is :func:`engine.performance.api.predict` with the profile's
parameters in the engine's Context (``predict(..., calibration=overlay)``: same candidate layouts, same
model, same result type) and the residual factor, if the profile has one, on the step time. The result's
notes name the profile and its version. ``search_calibrated`` does the same for the search. What a profile
changes and when it transfers to other hardware is :mod:`engine.performance.calibrated`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.catalog import CatalogItems
from engine.document.parse import parse_scenario
from engine.performance.api import predict, search
from engine.performance.calibrated import overlay_for
from engine.performance.result import Result, SearchResult
from engine.schema.calibration import Profile
from engine.schema.types import ScenarioSpec


def predict_calibrated(scenario: Mapping[str, Any] | ScenarioSpec, profile: Profile | Mapping[str, Any],
                       catalog: CatalogItems | None = None, *, borrow: bool = False) -> Result:
    """:func:`predict` with ``profile`` applied (a :class:`Profile` or its ``to_dict()``)."""
    s = parse_scenario(scenario, catalog)
    return predict(s, catalog, calibration=overlay_for(s, profile, catalog, borrow=borrow))


def search_calibrated(scenario: Mapping[str, Any] | ScenarioSpec, profile: Profile | Mapping[str, Any], top_k: int = 5,
                      catalog: CatalogItems | None = None, *, borrow: bool = False) -> SearchResult:
    """:func:`search` with ``profile`` applied; the residual factor scales the winner and every alternative."""
    s = parse_scenario(scenario, catalog)
    return search(s, top_k, catalog, calibration=overlay_for(s, profile, catalog, borrow=borrow))
