"""Creating and submitting runs: snapshot, input hash, reuse of an identical stored result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Team
from core.errors import ValidationError
from planning import services as planning
from planning.models import CatalogVersion, Scenario
from simulations.models import ACTIVE_STATUSES, RunKind, RunStatus, RunTrigger, SimulationRun, Sweep
from simulations.services import dispatch
from simulations.services.hashing import engine_version, input_hash
from simulations.services.params import check_kind, clean_params


def _snapshot(
    *,
    scenario: Scenario | None,
    kind: str,
    document: dict[str, Any],
    version: CatalogVersion | None,
    values: dict[str, Any],
    params: dict[str, Any],
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "document": document,
        "params": params,
        "overrides": dict(overrides or {}),
        "scenario": {"id": scenario.pk, "name": scenario.name} if scenario else None,
        "fleet": (
            {"id": scenario.fleet.pk, "updated_at": scenario.fleet.updated_at.isoformat()}
            if scenario is not None and scenario.fleet is not None else None
        ),
        "catalog": (
            {"id": version.catalog_id, "name": version.catalog.name, "version_id": version.pk,
             "version": version.number}
            if version is not None else {"id": None, "name": "engine default", "version_id": None, "version": None}
        ),
        "catalog_values": values,
    }


def run_create(
    *,
    team: Team,
    user: Any,
    kind: str,
    document: dict[str, Any],
    version: CatalogVersion | None,
    values: dict[str, Any],
    scenario: Scenario | None = None,
    params: Mapping[str, Any] | None = None,
    force: bool = False,
    trigger: str = RunTrigger.MANUAL,
    sweep: Sweep | None = None,
    overrides: Mapping[str, Any] | None = None,
    label: str = "",
    idempotency_key: str | None = None,
) -> SimulationRun:
    """Insert a QUEUED run row with its snapshot and hash (not enqueued; see ``enqueue_runs``).

    ``idempotency_key`` is unique among queued/running runs (database constraint): inserting a second active
    run with the same key raises ``IntegrityError`` (see ``run_submit``)."""
    cleaned = clean_params(kind, params)
    snapshot = _snapshot(scenario=scenario, kind=kind, document=document, version=version, values=values,
                         params=cleaned, overrides=overrides)
    now = timezone.now()
    return SimulationRun.objects.create(
        team=team,
        created_by=user if getattr(user, "pk", None) else None,
        updated_by=user if getattr(user, "pk", None) else None,
        scenario=scenario,
        sweep=sweep,
        catalog_version=version,
        kind=kind,
        trigger=trigger,
        label=label[:200] or (scenario.name if scenario else ""),
        input_snapshot=snapshot,
        input_hash=input_hash(kind=kind, document=document, catalog=values, params=cleaned),
        engine_version=engine_version(),
        params=cleaned,
        force=force,
        heartbeat_at=now,
        idempotency_key=idempotency_key,
    )


def _reusable(*, team_id: int, kind: str, input_hash_: str, version: str) -> SimulationRun | None:
    return (
        SimulationRun.objects.filter(
            team_id=team_id, kind=kind, input_hash=input_hash_, engine_version=version,
            status=RunStatus.SUCCEEDED, result__isnull=False,
        )
        .order_by("finished_at", "pk")
        .first()
    )


def idempotency_key(*, team_id: int, kind: str, input_hash_: str, version: str) -> str:
    """Identical submissions share this key: same team, kind, engine version and resolved inputs."""
    return f"{team_id}:{kind}:{version}:{input_hash_}"


def _active(key: str) -> SimulationRun | None:
    return SimulationRun.objects.filter(idempotency_key=key, status__in=ACTIVE_STATUSES).order_by("pk").first()


def run_submit(
    *,
    scenario: Scenario,
    user: Any,
    kind: str = RunKind.TCO,
    force: bool = False,
    params: Mapping[str, Any] | None = None,
    trigger: str = RunTrigger.MANUAL,
) -> SimulationRun:
    """Queue a run of ``scenario``; idempotent.

    * The resolved document is validated by the engine's parser first: nothing invalid reaches a worker.
    * An identical run that is queued or running is returned (``reused``), with or without ``force`` — a
      unique constraint on the idempotency key makes this hold under concurrency: of N identical requests at
      once one insert wins and the others answer the winner's run.
    * Without ``force``, an identical succeeded run (same input hash and engine version) is returned instead
      of computing again.
    """
    check_kind(kind)
    document, version, values = planning.scenario_resolve(scenario=scenario)
    cleaned = clean_params(kind, params)
    planning.document_validate(document=document, catalog=values)
    hash_ = input_hash(kind=kind, document=document, catalog=values, params=cleaned)
    key = idempotency_key(team_id=scenario.team_id, kind=kind, input_hash_=hash_, version=engine_version())
    for _ in range(3):  # a lost race finds the winner on the next pass (or its stored result)
        existing = None if force else _reusable(team_id=scenario.team_id, kind=kind, input_hash_=hash_,
                                                version=engine_version())
        existing = existing or _active(key)
        if existing is not None:
            existing.reused = True  # type: ignore[attr-defined]
            return existing
        try:
            with transaction.atomic():
                run = run_create(team=scenario.team, user=user, kind=kind, document=document, version=version,
                                 values=values, scenario=scenario, params=cleaned, force=force, trigger=trigger,
                                 idempotency_key=key)
                dispatch.enqueue_runs([run.pk])
        except IntegrityError:
            continue  # an identical submission inserted first
        run.reused = False  # type: ignore[attr-defined]
        return run
    raise ValidationError({"detail": ["identical submissions kept colliding; try again"]})
