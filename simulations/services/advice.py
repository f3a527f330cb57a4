"""The way out of a dead end, for a run or a draft document: nearest GPU counts that have a layout.

Thin wrapper over :mod:`engine.performance.advice` (the rules live there); used by the run page, the
builder's live estimate and the API's run error, so every surface offers the same way out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import ScenarioError
from engine.performance.advice import nearest_workable_gpus
from simulations.models import RunStatus, SimulationRun

LAYOUT_DEAD_END = "no layout satisfies"


def is_layout_dead_end(*, error: str, field: str = "") -> bool:
    return LAYOUT_DEAD_END in (error or "").lower() and (not field or field.startswith("parallelism"))


def gpu_count_advice(*, document: Mapping[str, Any], catalog: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Nearest workable GPU counts for a document whose GPU count has no layout (None when it has one)."""
    try:
        advice = nearest_workable_gpus(dict(document), catalog=dict(catalog) if catalog is not None else None)
    except (ScenarioError, ValueError, TypeError, KeyError):
        return None  # the document has another problem; its own error says which
    return None if advice.workable else advice.to_dict()


def run_advice(*, run: SimulationRun) -> dict[str, Any] | None:
    """For a run that failed because no layout can use its GPUs: why, and the nearest counts that work."""
    if run.status != RunStatus.FAILED or not is_layout_dead_end(error=run.error, field=run.error_field):
        return None
    snap = run.input_snapshot or {}
    document = snap.get("document")
    if not isinstance(document, Mapping):
        return None
    return gpu_count_advice(document=document, catalog=snap.get("catalog_values"))
