"""The synchronous quick estimate behind live forms (no run row, no queue)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from planning import services as planning
from simulations import engine
from simulations.services.hashing import engine_version, jsonable

PREVIEW_FIELDS = (
    "step_time_s", "tokens_per_s", "mfu", "hfu", "time_to_train_days", "gpu_hours", "network_wait_fraction",
    "memory_gb_per_gpu", "fits",
)


def preview(*, document: Mapping[str, Any], catalog: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A synchronous quick estimate for live forms: performance + the headline cost figures."""
    started = time.perf_counter()
    cat = dict(catalog) if catalog is not None else planning.catalog_resolve(catalog=None)[1]
    doc = json.loads(json.dumps(dict(document)))
    perf = jsonable(engine.predict(doc, catalog=cat).to_dict())
    out: dict[str, Any] = {k: perf.get(k) for k in PREVIEW_FIELDS if k in perf}
    out["breakdown_s"] = perf.get("breakdown_s")
    out["parallelism"] = perf.get("parallelism")
    if out.get("fits", True):
        try:
            costs = jsonable(engine.tco(doc, catalog=cat))
            t = costs.get("tco", {})
            for key in ("run_cost_usd", "usd_per_gpu_hour", "usd_per_million_tokens", "capex_usd", "annual_tco_usd"):
                out[key] = t.get(key)
        except ValueError as exc:
            if not hasattr(exc, "field"):
                raise
            out["cost_error"] = {str(exc.field): str(getattr(exc, "message", exc))}
    out["engine_version"] = engine_version()
    out["server_time_ms"] = round((time.perf_counter() - started) * 1000, 2)
    return out
