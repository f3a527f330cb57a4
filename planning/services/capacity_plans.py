"""Capacity plans (issue #14): a fleet over time against a demand plan; created, updated and deleted here.

The plan ``document`` is validated by the engine's plan parser (:func:`simulations.engine.fleet.parse_plan`)
on every write, so a stored plan always parses; errors name the field inside the document
(``document.clusters[1].gpus``). Every write is change-logged in its transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from accounts.models import Team
from core.errors import ValidationError
from planning import changelog
from planning.models import CapacityPlan, ObjectChange, Workload
from planning.services.common import _err, _update_logged
from planning.services.imports import MAX_CSV_ROWS, iter_csv
from simulations.engine.errors import ScenarioError
from simulations.engine.fleet import parse_plan

CAPACITY_PLAN_FIELDS = ("name", "description", "document")


def capacity_plan_validate(document: Any) -> None:
    """The engine parser's checks (types, bounds, keys, cross-references, catalog keys) as field errors."""
    if not isinstance(document, Mapping):
        raise _err("document", "must be a JSON object (the plan document, see docs/fleet-model.md)")
    try:
        parse_plan(document)
    except ScenarioError as exc:
        raise ValidationError({f"document.{exc.field}" if exc.field else "document": [exc.message]}) from None


def _clean(data: Mapping[str, Any], *, creating: bool) -> dict[str, Any]:
    out = {k: v for k, v in data.items() if k in CAPACITY_PLAN_FIELDS}
    if creating or "name" in out:
        name = out.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _err("name", "This field is required.")
        if len(name) > 120:
            raise _err("name", "at most 120 characters")
    if "description" in out and not isinstance(out["description"], str):
        raise _err("description", "must be a string")
    if creating and "document" not in out:
        raise _err("document", "This field is required.")
    if "document" in out:
        capacity_plan_validate(out["document"])
    return out


def capacity_plan_create(*, team: Team, user: Any, **fields: Any) -> CapacityPlan:
    data = _clean(fields, creating=True)
    with transaction.atomic():
        plan = CapacityPlan.objects.create(team=team, created_by=user, updated_by=user, **data)
        changelog.record(obj=plan, object_type="capacity_plan", action=ObjectChange.Action.CREATE, user=user)
    return plan


def capacity_plan_update(*, plan: CapacityPlan, user: Any, **fields: Any) -> CapacityPlan:
    data = _clean(fields, creating=False)
    _update_logged(plan, object_type="capacity_plan", user=user, data=data)
    return plan


def capacity_plan_delete(*, plan: CapacityPlan, user: Any) -> None:
    """Delete a plan; its runs stay (they hold their own input snapshot)."""
    with transaction.atomic():
        changelog.record(obj=plan, object_type="capacity_plan", action=ObjectChange.Action.DELETE, user=user,
                         before=changelog.snapshot(plan))
        plan.delete()


JOB_COLUMNS = ("name", "team", "gpus", "duration_days", "workload", "submit_day", "deadline_day", "priority",
               "cluster")
_NUMBER_COLUMNS = {"gpus": int, "duration_days": float, "submit_day": float, "deadline_day": float, "priority": int}


def _job_from_row(row: dict[str, str], workloads: dict[str, Workload]) -> dict[str, Any]:
    unknown = sorted(set(row) - set(JOB_COLUMNS))
    if unknown:
        raise ValidationError({unknown[0]: [f"unknown column; allowed: {', '.join(JOB_COLUMNS)}"]})
    job: dict[str, Any] = {}
    for key, raw in row.items():
        value = (raw or "").strip()
        if not value:
            continue
        if key == "workload":
            w = workloads.get(value)
            if w is None:
                raise ValidationError({"workload": [f"no workload of this team is called {value!r}"]})
            job["workload"] = {"model": w.model, "training": w.training, "parallelism": w.parallelism}
        elif key == "gpus" and value == "auto":
            job["gpus"] = "auto"
        elif key in _NUMBER_COLUMNS:
            try:
                number = float(value)
            except ValueError:
                raise ValidationError({key: [f"must be a number, got {value[:40]!r}"]}) from None
            if _NUMBER_COLUMNS[key] is int and not number.is_integer():
                raise ValidationError({key: [f"must be an integer, got {value[:40]!r}"]})
            job[key] = int(number) if _NUMBER_COLUMNS[key] is int else number
        else:
            job[key] = value
    return job


def capacity_plan_import_jobs(*, plan: CapacityPlan, user: Any, file: Any, replace: bool = True) -> CapacityPlan:
    """The plan's named jobs from a demand-plan CSV (columns: name, team, gpus, duration_days | workload,
    submit_day, deadline_day, priority, cluster). ``workload`` names one of the team's workloads: its model,
    training (token budget) and parallelism become the job's, so the engine predicts its run time on each
    cluster. All or nothing: conversion errors per line, then the whole document through the plan parser."""
    workloads = {w.name: w for w in Workload.objects.filter(team_id=plan.team_id)}
    jobs: list[dict[str, Any]] = []
    errors: dict[str, Any] = {}
    for line, row in iter_csv(file):
        if len(jobs) >= MAX_CSV_ROWS:
            raise _err("file", f"at most {MAX_CSV_ROWS:,} rows")
        try:
            jobs.append(_job_from_row(row, workloads))
        except ValidationError as exc:
            errors[str(line)] = exc.detail
    if errors:
        raise ValidationError({"rows": errors})
    if not jobs:
        raise _err("file", "has no data rows")
    document = dict(plan.document)
    document["jobs"] = jobs if replace else [*(document.get("jobs") or []), *jobs]
    return capacity_plan_update(plan=plan, user=user, document=document)
