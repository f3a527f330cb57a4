"""Simulation selectors: runs, sweeps, reports and re-evaluations visible to a request or user, and the engine's
accuracy on published runs (the same for everyone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db.models import QuerySet

from core.errors import ValidationError
from engine.validation.summary import ALL_SETS, load_summary
from engine.version import ENGINE_VERSION
from simulations.models import ReEvaluation, Report, RunEvent, SimulationRun, Sweep


def run_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[SimulationRun]:
    qs = SimulationRun.objects.for_request(request_or_user).select_related("scenario", "catalog_version")
    for key in ("status", "kind", "scenario", "sweep"):
        if filters and filters.get(key):
            qs = qs.filter(**{f"{key}_id" if key in ("scenario", "sweep") else key: filters[key]})
    return qs


def run_events(run: SimulationRun) -> QuerySet[RunEvent]:
    """A run's execution history, oldest first (the run itself was read through the visibility rule)."""
    return RunEvent.objects.filter(run=run).order_by("at", "id")


def runs_by_ids(request_or_user: Any, ids: Sequence[int], *, field: str = "runs") -> list[SimulationRun]:
    """The runs with these ids, in the given order; any id not visible is reported as not found."""
    found = {r.pk: r for r in run_list(request_or_user).filter(pk__in=list(ids))}
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValidationError({field: [f"run(s) not found: {', '.join(map(str, missing))}"]})
    return [found[i] for i in ids]


def sweep_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Sweep]:
    qs = Sweep.objects.for_request(request_or_user)
    if filters and filters.get("scenario"):
        qs = qs.filter(scenario_id=filters["scenario"])
    return qs


def report_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[Report]:
    return Report.objects.for_request(request_or_user).prefetch_related("runs")


def reevaluation_list(request_or_user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[ReEvaluation]:
    qs = ReEvaluation.objects.for_request(request_or_user).select_related("scenario")
    if filters and filters.get("scenario"):
        qs = qs.filter(scenario_id=filters["scenario"])
    return qs


def model_accuracy() -> dict[str, Any]:
    """How well the engine predicts published training runs (not team data: the same for every user): the summary
    ``make validation`` writes (engine/validation/summary.py) with the engine version it describes."""
    return {"engine_version": ENGINE_VERSION, **load_summary()}


def accuracy_sets(summary: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The summary's all-sets entry (None when there is no summary) and the per-set entries."""
    sets = list(summary.get("sets", []))
    return next((s for s in sets if s.get("key") == ALL_SETS), None), [s for s in sets if s.get("key") != ALL_SETS]
