"""The synchronous quick estimate behind live forms (no run row, no queue)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from engine.cost.tco import tco
from engine.document.parse import parse_scenario
from engine.performance.api import predict
from engine.schema.types import ScenarioSpec
from planning import services as planning
from simulations import metrics
from simulations.services.hashing import engine_version, jsonable

# The live estimate's figures come from the metric registry: performance ones from predict, cost ones from tco.
PREVIEW_FIELDS = (*(m.key for m in metrics.PREVIEW if m.path.startswith(metrics.PERFORMANCE)), "fits")
PREVIEW_COSTS = tuple(m.path.removeprefix("tco.") for m in metrics.PREVIEW if m.path.startswith("tco."))


def preview(*, document: Mapping[str, Any] | ScenarioSpec,
            catalog: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A synchronous quick estimate for live forms: performance + the headline cost figures.

    ``document`` is a scenario document, or the engine Scenario the caller's validation already parsed from it
    with the same ``catalog`` (then it is not parsed again). The document is parsed and its fabric sized once,
    and the performance model runs once: the cost figures reuse the prediction.
    """
    started = time.perf_counter()
    cat = dict(catalog) if catalog is not None else planning.catalog_resolve(catalog=None)[1]
    if isinstance(document, ScenarioSpec):
        scenario = document
    else:
        scenario = parse_scenario(json.loads(json.dumps(dict(document))), cat)
    result = predict(scenario, catalog=cat)
    perf = jsonable(result.to_dict())
    out: dict[str, Any] = {k: perf.get(k) for k in PREVIEW_FIELDS if k in perf}
    out["breakdown_s"] = perf.get("breakdown_s")
    out["parallelism"] = perf.get("parallelism")
    if out.get("fits", True):
        try:
            costs = jsonable(tco(scenario, catalog=cat, performance=result))
            t = costs.get("tco", {})
            for key in PREVIEW_COSTS:
                out[key] = t.get(key)
        except ValueError as exc:
            if not hasattr(exc, "field"):
                raise
            out["cost_error"] = {str(exc.field): str(getattr(exc, "message", exc))}
    out["engine_version"] = engine_version()
    out["server_time_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return out
