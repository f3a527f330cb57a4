"""Submitting capacity-plan runs (issue #14) and finding a plan's runs.

A run of a plan snapshots the plan document and the default catalog's values, like a scenario run, and is
deduplicated the same way (identical queued/running/stored run of the team is returned, ``reused``). The
snapshot names the plan (``input_snapshot.capacity_plan``), which is how a plan finds its runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from core.errors import ValidationError
from planning.models import CapacityPlan
from planning.services.catalogs import catalog_resolve
from simulations.engine.errors import ScenarioError
from simulations.engine.fleet import parse_plan
from simulations.models import RunKind, SimulationRun
from simulations.services import dispatch
from simulations.services.hashing import engine_version, input_hash
from simulations.services.params import clean_params
from simulations.services.runs import _active, _reusable, idempotency_key, run_create


def plan_runs(plan: CapacityPlan) -> QuerySet[SimulationRun]:
    """Runs of ``plan`` (newest first)."""
    return SimulationRun.objects.filter(team_id=plan.team_id, kind=RunKind.FLEET,
                                        input_snapshot__capacity_plan__id=plan.pk).order_by("-queued_at", "-pk")


def capacity_plan_submit(*, plan: CapacityPlan, user: Any, params: Mapping[str, Any] | None = None,
                         force: bool = False) -> SimulationRun:
    """Queue a run of ``plan``; idempotent like scenario runs (an identical queued, running or stored run of
    the same team is returned, marked ``reused``)."""
    cleaned = clean_params(RunKind.FLEET, params)
    version, values = catalog_resolve(catalog=None)
    document = dict(plan.document)
    try:
        parse_plan(document, values)
    except ScenarioError as exc:
        raise ValidationError({f"document.{exc.field}": [exc.message]}) from None
    hash_ = input_hash(kind=RunKind.FLEET, document=document, catalog=values, params=cleaned)
    key = idempotency_key(team_id=plan.team_id, kind=RunKind.FLEET, input_hash_=hash_, version=engine_version())
    for _ in range(3):
        existing = None if force else _reusable(team_id=plan.team_id, kind=RunKind.FLEET, input_hash_=hash_,
                                                version=engine_version())
        existing = existing or _active(key)
        if existing is not None:
            existing.reused = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                run = run_create(team=plan.team, user=user, kind=RunKind.FLEET, document=document, version=version,
                                 values=values, params=cleaned, force=force, label=f"Capacity plan: {plan.name}",
                                 idempotency_key=key)
                run.input_snapshot["capacity_plan"] = {"id": plan.pk, "name": plan.name}
                run.save(update_fields=["input_snapshot"])
                dispatch.enqueue_runs([run.pk])
        except IntegrityError:
            continue
        run.reused = False  # type: ignore[attr-defined]
        return run
    raise ValidationError({"detail": ["identical submissions kept colliding; try again"]})
