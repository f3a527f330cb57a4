"""What the engine computed for a run, term by term (issue #21: ``explain`` on the run page).

``run_explain(run=...)`` re-evaluates the run's predicted layout from the run's own input snapshot (the document
and catalog values it ran on) with :func:`engine.performance.explain.explain`: every named term of that one layout,
each number with its unit. Cheap (one layout, no search beyond matching the stored layout), read-only, and only
for runs whose result fits: a layout that does not fit has no figures to explain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import ScenarioError
from engine.performance.explain import explain, unit_of
from simulations.models import RunKind, RunStatus, SimulationRun
from simulations.results import performance_of

EXPLAINED_KINDS = (RunKind.PREDICT, RunKind.SEARCH, RunKind.TCO)


def _rows(node: Any, path: str, unit: str | None, out: list[dict[str, Any]]) -> None:
    """Flatten a record tree into (term, value, unit) rows; a key's unit suffix applies to the numbers under it."""
    if isinstance(node, Mapping) and set(node) == {"value", "unit"}:
        out.append({"term": path, "value": node["value"], "unit": node["unit"]})
    elif isinstance(node, Mapping):
        for key, value in node.items():
            _rows(value, f"{path}.{key}" if path else str(key), unit_of(str(key)) or unit, out)
    elif isinstance(node, bool):
        out.append({"term": path, "value": "yes" if node else "no", "unit": ""})
    elif isinstance(node, int | float):
        out.append({"term": path, "value": float(node), "unit": unit or ""})


def run_explain(*, run: SimulationRun) -> dict[str, Any] | None:
    """Every term of the run's layout, or None when there is nothing to explain (other kinds, unfinished, unfit)."""
    if run.kind not in EXPLAINED_KINDS or run.status != RunStatus.SUCCEEDED:
        return None
    perf = performance_of(run.result)
    snap = run.input_snapshot if isinstance(run.input_snapshot, Mapping) else {}
    document, catalog = snap.get("document"), snap.get("catalog_values")
    if not perf.get("fits") or not isinstance(perf.get("parallelism"), Mapping) or not isinstance(document, Mapping):
        return None
    try:
        data = explain(dict(document), catalog=dict(catalog) if isinstance(catalog, Mapping) else None,
                       layout=dict(perf["parallelism"]))
    except (ScenarioError, ValueError, KeyError, TypeError):
        return None  # an older engine's layout that this engine no longer offers: nothing to explain
    terms: list[dict[str, Any]] = []
    _rows(data["terms"], "", None, terms)
    groups: list[dict[str, Any]] = []
    _rows(data["groups"], "", None, groups)
    return {"layout": data["layout"], "step_time_s": data["step_time_s"],
            "memory_gb": data["memory_bytes"] / 1e9, "memory_limit_gb": data["memory_limit_bytes"] / 1e9,
            "terms": terms, "groups": groups}
